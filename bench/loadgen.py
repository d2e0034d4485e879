#!/usr/bin/env python3
"""The issue-7 workload against beanstalkd or gearmand, stdlib only.

One producer connection pipelines PIPELINE submissions at a time (writes
them, then reads their answers); WORKERS worker connections each reserve,
"run" (no-op) and acknowledge one job at a time. Every connection is its own
process, so Python's GIL is not shared between them. Prints one JSON line:
submit and drain rates (first submission to last acknowledgement).

    loadgen.py beanstalkd 127.0.0.1:11300 [--jobs N] [--workers W]
    loadgen.py gearmand   127.0.0.1:4730  [--jobs N] [--workers W]
"""

import argparse
import json
import multiprocessing as mp
import socket
import struct
import time

PAYLOAD = b"x" * 32
FUNCTION = b"bench_noop"


def connect(addr):
    host, port = addr.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


class Reader:
    """Buffered reads of lines and exact byte counts from a socket."""

    def __init__(self, sock):
        self.sock, self.buf = sock, b""

    def fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionError("server closed the connection")
        self.buf += chunk

    def line(self):
        while b"\r\n" not in self.buf:
            self.fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def exact(self, n):
        while len(self.buf) < n:
            self.fill()
        data, self.buf = self.buf[:n], self.buf[n:]
        return data


# ------------------------------------------------------------- beanstalkd

def beanstalk_produce(addr, jobs, pipeline):
    sock = connect(addr)
    reader = Reader(sock)
    put = b"put 1024 0 60 %d\r\n%s\r\n" % (len(PAYLOAD), PAYLOAD)
    sent = 0
    while sent < jobs:
        n = min(pipeline, jobs - sent)
        sock.sendall(put * n)
        for _ in range(n):
            answer = reader.line()
            if not answer.startswith(b"INSERTED"):
                raise RuntimeError("put: %r" % answer)
        sent += n


def beanstalk_work(addr, done, jobs, last):
    sock = connect(addr)
    reader = Reader(sock)
    finished_at = 0.0
    while done.value < jobs:
        sock.sendall(b"reserve-with-timeout 1\r\n")
        answer = reader.line()
        if answer == b"TIMED_OUT":
            continue
        parts = answer.split()
        if parts[0] != b"RESERVED":
            raise RuntimeError("reserve: %r" % answer)
        reader.exact(int(parts[2]) + 2)
        sock.sendall(b"delete %s\r\n" % parts[1])
        if reader.line() != b"DELETED":
            raise RuntimeError("delete failed")
        finished_at = time.monotonic()
        with done.get_lock():
            done.value += 1
    last.put(finished_at)


# ---------------------------------------------------------------- gearman

def packet(kind, *args):
    body = b"\0".join(args)
    return b"\0REQ" + struct.pack(">II", kind, len(body)) + body


def read_packet(reader):
    header = reader.exact(12)
    kind, size = struct.unpack(">II", header[4:])
    return kind, reader.exact(size)


SUBMIT_JOB_BG, JOB_CREATED = 18, 8
CAN_DO, GRAB_JOB, NO_JOB, JOB_ASSIGN, WORK_COMPLETE = 1, 9, 10, 11, 13
PRE_SLEEP, NOOP = 4, 6


def gearman_produce(addr, jobs, pipeline):
    sock = connect(addr)
    reader = Reader(sock)
    submit = packet(SUBMIT_JOB_BG, FUNCTION, b"", PAYLOAD)
    sent = 0
    while sent < jobs:
        n = min(pipeline, jobs - sent)
        sock.sendall(submit * n)
        for _ in range(n):
            kind, _ = read_packet(reader)
            if kind != JOB_CREATED:
                raise RuntimeError("submit answered with packet type %d" % kind)
        sent += n


def gearman_work(addr, done, jobs, last):
    sock = connect(addr)
    reader = Reader(sock)
    sock.sendall(packet(CAN_DO, FUNCTION))
    finished_at = 0.0
    while done.value < jobs:
        sock.sendall(packet(GRAB_JOB))
        kind, body = read_packet(reader)
        if kind == NO_JOB:
            sock.sendall(packet(PRE_SLEEP))
            sock.settimeout(0.5)
            try:
                read_packet(reader)  # NOOP: work is available again
            except socket.timeout:
                pass
            sock.settimeout(None)
            continue
        if kind != JOB_ASSIGN:
            raise RuntimeError("grab answered with packet type %d" % kind)
        handle = body.split(b"\0", 1)[0]
        sock.sendall(packet(WORK_COMPLETE, handle, b""))
        finished_at = time.monotonic()
        with done.get_lock():
            done.value += 1
    last.put(finished_at)


SERVERS = {
    "beanstalkd": (beanstalk_produce, beanstalk_work),
    "gearmand": (gearman_produce, gearman_work),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("server", choices=sorted(SERVERS))
    parser.add_argument("addr")
    parser.add_argument("--jobs", type=int, default=20000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--pipeline", type=int, default=100)
    args = parser.parse_args()
    produce, work = SERVERS[args.server]
    done, last = mp.Value("q", 0), mp.Queue()
    workers = [mp.Process(target=work, args=(args.addr, done, args.jobs, last))
               for _ in range(args.workers)]
    for w in workers:
        w.start()
    time.sleep(0.3)  # let every worker connect and register first
    started = time.monotonic()
    produce(args.addr, args.jobs, args.pipeline)
    submitted = time.monotonic()
    finished = max(last.get() for _ in workers)
    for w in workers:
        w.join()
    submit_secs, drain_secs = submitted - started, finished - started
    print(json.dumps({
        "server": args.server, "jobs": args.jobs, "done": done.value,
        "submit_secs": submit_secs, "submit_jobs_per_sec": args.jobs / submit_secs,
        "drain_secs": drain_secs, "drain_jobs_per_sec": args.jobs / drain_secs,
    }))


if __name__ == "__main__":
    main()
