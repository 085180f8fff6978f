#!/usr/bin/env python3
#
# leaf_delay_proxy.py: a TCP proxy on loopback that holds every chunk of
# data it passes for a one-way delay, in each direction, as a slow network
# would.  test/bench/leaf_tp999.sh puts it between the shards and their
# allocation database.  Python 3 standard library only.
#
#   leaf_delay_proxy.py --target-port 5432 --port-file F --profile P
#
# The proxy listens on a free loopback port (or --listen-port) and writes
# it to --port-file once it listens.  The profile file holds two numbers,
# "DELAY_MS JITTER_MS": each chunk read from one side is written to the
# other side DELAY_MS +- JITTER_MS later (uniform, never below 0), drawn
# afresh for each chunk and each direction.  Chunks of one direction keep
# their order: a chunk never leaves before the one read before it, as on
# one TCP connection.  The file is read again whenever it is replaced, so
# the delay of open connections changes without reconnecting; replace it
# whole (write another file, then mv).
#
# SIGTERM ends the proxy and every connection through it.

import argparse
import collections
import os
import random
import signal
import socket
import sys
import threading
import time


class Profile:
    """The delay profile, read again when its file is replaced."""

    def __init__(self, path):
        self.path = path
        self.key = None
        self.delay = 0.0
        self.jitter = 0.0
        self.lock = threading.Lock()
        self.refresh()

    def refresh(self):
        try:
            st = os.stat(self.path)
        except OSError:
            return
        key = (st.st_ino, st.st_mtime_ns, st.st_size)
        if key == self.key:
            return
        with self.lock:
            try:
                with open(self.path) as f:
                    fields = f.read().split()
                delay = float(fields[0]) / 1000.0
                jitter = float(fields[1]) / 1000.0 if len(fields) > 1 else 0.0
            except (OSError, ValueError, IndexError):
                return
            self.delay, self.jitter, self.key = delay, jitter, key

    def draw(self):
        """A one-way delay in seconds."""
        self.refresh()
        d = self.delay
        if self.jitter > 0:
            d += random.uniform(-self.jitter, self.jitter)
        return max(d, 0.0)


class Direction:
    """One direction of one connection: a reader and a sender thread."""

    def __init__(self, src, dst, profile, done):
        self.src, self.dst, self.profile, self.done = src, dst, profile, done
        self.queue = collections.deque()
        self.cond = threading.Condition()
        self.last_due = 0.0

    def start(self):
        threading.Thread(target=self.read, daemon=True).start()
        threading.Thread(target=self.send, daemon=True).start()

    def read(self):
        while True:
            try:
                data = self.src.recv(65536)
            except OSError:
                data = b''
            now = time.monotonic()
            due = max(now + self.profile.draw(), self.last_due)
            self.last_due = due
            with self.cond:
                self.queue.append((due, data))
                self.cond.notify()
            if not data:
                return

    def send(self):
        while True:
            with self.cond:
                while not self.queue:
                    self.cond.wait()
                due, data = self.queue[0]
                wait = due - time.monotonic()
                if wait > 0:
                    self.cond.wait(wait)
                    continue
                self.queue.popleft()
            if not data:
                try:
                    self.dst.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                break
            try:
                self.dst.sendall(data)
            except OSError:
                break
        self.done()


def serve(client, target_port, profile):
    try:
        server = socket.create_connection(('127.0.0.1', target_port))
    except OSError:
        client.close()
        return
    for s in (client, server):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    left = [2]
    lock = threading.Lock()

    def done():
        with lock:
            left[0] -= 1
            last = left[0] == 0
        if last:
            client.close()
            server.close()

    Direction(client, server, profile, done).start()
    Direction(server, client, profile, done).start()


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument('--target-port', type=int, required=True)
    ap.add_argument('--listen-port', type=int, default=0)
    ap.add_argument('--port-file', required=True)
    ap.add_argument('--profile', required=True)
    args = ap.parse_args()

    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    profile = Profile(args.profile)
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(('127.0.0.1', args.listen_port))
    ls.listen(64)
    tmp = args.port_file + '.tmp'
    with open(tmp, 'w') as f:
        f.write('%d\n' % ls.getsockname()[1])
    os.replace(tmp, args.port_file)
    while True:
        try:
            client, _ = ls.accept()
        except InterruptedError:
            continue
        serve(client, args.target_port, profile)


if __name__ == '__main__':
    sys.exit(main())
