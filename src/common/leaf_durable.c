/*-------------------------------------------------------------------------
 *
 * leaf_durable.c
 *	  Writing a small file of the data directory durably: the whole
 *	  content to a temporary file, fsync, rename over the file, fsync of
 *	  the directory.
 *
 * A crash at any moment leaves either the old file or the new one, never
 * a part of either.  The warm start's file (leaf_warm_start.c) and the
 * snowflake worker's state file (leaf_sf_state.c) are written this way.
 * Neither may stop its writer when the write fails (a full or read-only
 * directory): each step that fails is reported at the caller's level,
 * and the caller is told, and tries again later.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <unistd.h>

#include "storage/fd.h"

#include "common/leaf_durable.h"

/*
 * Write len bytes of data as file path, through tmppath (in the same
 * directory), durably.  Returns false if it could not, after a line at
 * elevel whose message starts with who ("" or the writer's name and a
 * space) and names the step and the file.
 */
bool
leaf_durable_write(const char *path, const char *tmppath, const char *data,
				   int len, int elevel, const char *who)
{
	int			fd;

	fd = OpenTransientFile(tmppath, O_WRONLY | O_CREAT | O_TRUNC | PG_BINARY);
	if (fd < 0)
	{
		ereport(elevel,
				(errcode_for_file_access(),
				 errmsg("%scould not create file \"%s\": %m", who, tmppath)));
		return false;
	}
	errno = 0;
	if (write(fd, data, len) != len)
	{
		int			save_errno = errno != 0 ? errno : ENOSPC;

		CloseTransientFile(fd);
		errno = save_errno;
		ereport(elevel,
				(errcode_for_file_access(),
				 errmsg("%scould not write file \"%s\": %m", who, tmppath)));
		return false;
	}
	if (pg_fsync(fd) != 0)
	{
		int			save_errno = errno;

		CloseTransientFile(fd);
		errno = save_errno;
		ereport(elevel,
				(errcode_for_file_access(),
				 errmsg("%scould not fsync file \"%s\": %m", who, tmppath)));
		return false;
	}
	if (CloseTransientFile(fd) != 0)
	{
		ereport(elevel,
				(errcode_for_file_access(),
				 errmsg("%scould not close file \"%s\": %m", who, tmppath)));
		return false;
	}
	return durable_rename(tmppath, path, elevel) == 0;
}
