/*-------------------------------------------------------------------------
 *
 * leaf_alloc_shape.c
 *	  Check that leaf_alloc still has the shape the allocator reads.
 *
 * The allocator reads max_id as a bigint and step as an integer, and
 * counts on both being there, and on the table surviving a crash.  A
 * superuser can change any of that with ALTER TABLE; read as the wrong
 * type, a column gives garbage (a numeric's pointer taken for max_id), a
 * NULL gives 0, and an unlogged table is emptied by a crash.  Each of
 * these would repeat IDs, so a load is refused (LF011) until the table is
 * put back as the extension made it; leaf_alloc_shape_refuse() says so to
 * the callers.
 *
 * The same check serves the local leaf_alloc (from the relation cache,
 * before every load) and a remote one (from its catalog, once a
 * connection).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "catalog/pg_attribute.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "segment/leaf_alloc.h"
#include "common/leaf_errcodes.h"

typedef struct LeafColumnShape
{
	const char *name;
	Oid			typid;
	const char *typname;
} LeafColumnShape;

/* the columns the allocator reads; all are NOT NULL */
static const LeafColumnShape leaf_alloc_columns[] = {
	{"biz_tag", VARCHAROID, "character varying"},
	{"max_id", INT8OID, "bigint"},
	{"step", INT4OID, "integer"},
};

#define LEAF_ALLOC_NCOLUMNS lengthof(leaf_alloc_columns)

/*
 * Is one column of leaf_alloc, as found, one that the allocator can read?
 * found is false for a column that is not there.  Fills errbuf otherwise.
 */
bool
leaf_alloc_column_ok(const char *name, bool found, Oid typid, bool notnull,
					 char *errbuf, size_t errlen)
{
	int			i;

	for (i = 0; i < LEAF_ALLOC_NCOLUMNS; i++)
	{
		const LeafColumnShape *c = &leaf_alloc_columns[i];

		if (strcmp(c->name, name) != 0)
			continue;
		if (!found)
			snprintf(errbuf, errlen, "column leaf_alloc.%s is missing", name);
		else if (typid != c->typid)
			snprintf(errbuf, errlen,
					 "column leaf_alloc.%s is of type %s, not %s",
					 name, format_type_be(typid), c->typname);
		else if (!notnull)
			snprintf(errbuf, errlen,
					 "column leaf_alloc.%s is no longer NOT NULL", name);
		else
			return true;
		return false;
	}
	return true;				/* not one the allocator reads */
}

/*
 * The names of the columns leaf_alloc_column_ok() checks, as the rows of
 * a VALUES list for a query.
 */
const char *
leaf_alloc_column_values(void)
{
	static char values[128];
	int			i;

	if (values[0] == '\0')
		for (i = 0; i < LEAF_ALLOC_NCOLUMNS; i++)
			snprintf(values + strlen(values), sizeof(values) - strlen(values),
					 "%s('%s')", i > 0 ? ", " : "", leaf_alloc_columns[i].name);
	return values;
}

/* Is a table of this relpersistence one that keeps counters? */
bool
leaf_alloc_persistence_ok(char relpersistence, char *errbuf, size_t errlen)
{
	if (relpersistence == RELPERSISTENCE_PERMANENT)
		return true;
	snprintf(errbuf, errlen,
			 "table leaf_alloc is %s: a crash would empty it",
			 relpersistence == RELPERSISTENCE_UNLOGGED ? "unlogged" : "temporary");
	return false;
}

/*
 * The check of this database's leaf_alloc in schema nsp, from the
 * relation cache.  Returns false with the reason in errbuf.
 */
bool
leaf_alloc_shape_ok(Oid nsp, char *errbuf, size_t errlen)
{
	Oid			relid = get_relname_relid("leaf_alloc", nsp);
	Relation	rel;
	TupleDesc	desc;
	bool		ok;
	int			i;

	if (!OidIsValid(relid))
	{
		snprintf(errbuf, errlen, "table leaf_alloc is missing");
		return false;
	}
	rel = table_open(relid, AccessShareLock);
	desc = RelationGetDescr(rel);
	ok = leaf_alloc_persistence_ok(rel->rd_rel->relpersistence, errbuf, errlen);
	for (i = 0; ok && i < LEAF_ALLOC_NCOLUMNS; i++)
	{
		const char *name = leaf_alloc_columns[i].name;
		AttrNumber	attnum = get_attnum(relid, name);
		Form_pg_attribute att;

		if (attnum <= 0)
		{
			ok = leaf_alloc_column_ok(name, false, InvalidOid, false,
									  errbuf, errlen);
			break;
		}
		att = TupleDescAttr(desc, attnum - 1);
		ok = leaf_alloc_column_ok(name, true, att->atttypid, att->attnotnull,
								  errbuf, errlen);
	}
	table_close(rel, AccessShareLock);
	return ok;
}

/*
 * Make *res the refusal (LF011) of a load of tag from a leaf_alloc whose
 * shape leaf_alloc_shape_ok() refused, with the reason in res->msg.
 */
void
leaf_alloc_shape_refuse(const char *tag, LeafLoadResult *res)
{
	LeafRefusal *r = &res->refusal;

	res->status = LEAF_LOAD_FINAL;
	res->sqlstate = ERRCODE_LEAF_ALLOC_SHAPE;
	snprintf(r->message, sizeof(r->message),
			 "refusing to allocate a segment for biz_tag \"%s\": %s",
			 tag, res->msg);
	strlcpy(r->detail,
			"The allocator reads max_id as bigint and step as integer, both NOT NULL, from a logged table; anything else could repeat IDs.",
			sizeof(r->detail));
	r->detail_public[0] = '\0';
	strlcpy(r->hint,
			"Put leaf_alloc back as the extension created it (ALTER TABLE ... ALTER COLUMN ... TYPE, SET NOT NULL, SET LOGGED).",
			sizeof(r->hint));
}
