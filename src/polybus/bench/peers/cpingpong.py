"""C TCP ping-pong and bandwidth: the floor a Python call path is measured against.

The C source is kept here as a string and compiled with ``cc -O2`` on first use into
``~/.cache/polybus/`` (``$XDG_CACHE_HOME`` if set), under a name keyed by a hash of the
source, so a change to the source builds a new binary. One binary, three modes::

    pp server                         bind 127.0.0.1:0, print the port, serve one client
    pp latency PORT REPS ITERS SIZE   print "median min max n" of the RTT in µs
    pp bandwidth PORT REPS SIZE       print "median min max n" of one-way GB/s

The wire protocol is rawsocket's (8-byte header ``op,len`` in host order). Both
processes are children of this one, reaped in ``finally`` by the PID started.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from polybus.bench.peers import PeerUnavailable
from polybus.bench.peers._proc import reap, spawn
from polybus.bench.placement import DEFAULT, Placement, cpu_sets, pinned_self
from polybus.bench.stats import Stat

__all__ = ["C_SOURCE", "bandwidth_gbps", "binary_path", "ensure_binary", "rtt_us"]

C_SOURCE = r"""
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { ECHO = 1, SINK = 2 };

static void die(const char *what) { perror(what); exit(2); }

static int recv_exact(int fd, char *p, size_t n) {
    size_t got = 0;
    while (got < n) {
        ssize_t k = recv(fd, p + got, n - got, 0);
        if (k < 0) die("recv");
        if (k == 0) { if (got == 0) return 0; fprintf(stderr, "short read\n"); exit(2); }
        got += (size_t)k;
    }
    return 1;
}

static void send_all(int fd, const char *p, size_t n) {
    size_t sent = 0;
    while (sent < n) {
        ssize_t k = send(fd, p + sent, n - sent, 0);
        if (k <= 0) die("send");
        sent += (size_t)k;
    }
}

static void nodelay(int fd) {
    int one = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0) die("nodelay");
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void report(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp);
    double med = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    printf("%.6f %.6f %.6f %d\n", med, v[0], v[n - 1], n);
}

static int serve(void) {
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    if (ls < 0) die("socket");
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    if (bind(ls, (struct sockaddr *)&a, sizeof a) < 0) die("bind");
    if (listen(ls, 1) < 0) die("listen");
    socklen_t al = sizeof a;
    if (getsockname(ls, (struct sockaddr *)&a, &al) < 0) die("getsockname");
    printf("%d\n", ntohs(a.sin_port));
    fflush(stdout);
    int fd = accept(ls, NULL, NULL);
    if (fd < 0) die("accept");
    close(ls);
    nodelay(fd);
    char *buf = NULL;
    size_t cap = 0;
    uint32_t h[2];
    while (recv_exact(fd, (char *)h, sizeof h)) {
        size_t n = h[1];
        if (n + sizeof h > cap) {
            free(buf);
            cap = n + sizeof h;
            buf = malloc(cap);
            if (!buf) die("malloc");
        }
        if (n && !recv_exact(fd, buf + sizeof h, n)) break;
        if (h[0] == ECHO) {
            memcpy(buf, h, sizeof h);
            send_all(fd, buf, n + sizeof h);
        } else {
            send_all(fd, "\1", 1);
        }
    }
    close(fd);
    free(buf);
    return 0;
}

static int connect_to(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) die("socket");
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) die("connect");
    nodelay(fd);
    return fd;
}

static int latency(int port, int reps, int iters, size_t size) {
    int fd = connect_to(port);
    size_t total = size + 8;
    char *msg = calloc(1, total), *reply = malloc(total);
    double *v = malloc(sizeof(double) * (size_t)reps);
    if (!msg || !reply || !v) die("malloc");
    uint32_t h[2] = {ECHO, (uint32_t)size};
    memcpy(msg, h, sizeof h);
    for (int r = -1; r < reps; r++) {  /* r = -1 is the untimed warm-up */
        double t0 = now();
        for (int i = 0; i < iters; i++) {
            send_all(fd, msg, total);
            if (!recv_exact(fd, reply, total)) die("eof");
        }
        if (r >= 0) v[r] = (now() - t0) / iters * 1e6;
    }
    report(v, reps);
    close(fd);
    return 0;
}

static int bandwidth(int port, int reps, size_t size) {
    int fd = connect_to(port);
    char *data = malloc(size ? size : 1), ack;
    double *v = malloc(sizeof(double) * (size_t)reps);
    if (!data || !v) die("malloc");
    memset(data, 7, size);
    uint32_t h[2] = {SINK, (uint32_t)size};
    for (int r = -1; r < reps; r++) {
        double t0 = now();
        send_all(fd, (const char *)h, sizeof h);
        send_all(fd, data, size);
        if (!recv_exact(fd, &ack, 1)) die("eof");
        if (r >= 0) v[r] = (double)size / (now() - t0) / 1e9;
    }
    report(v, reps);
    close(fd);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "server")) return serve();
    if (argc == 6 && !strcmp(argv[1], "latency"))
        return latency(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), strtoul(argv[5], 0, 10));
    if (argc == 5 && !strcmp(argv[1], "bandwidth"))
        return bandwidth(atoi(argv[2]), atoi(argv[3]), strtoul(argv[4], 0, 10));
    fprintf(stderr, "usage: pp server | latency PORT REPS ITERS SIZE | bandwidth PORT REPS SIZE\n");
    return 1;
}
"""


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "polybus"


def binary_path() -> Path:
    digest = hashlib.sha256(C_SOURCE.encode()).hexdigest()[:16]
    return _cache_dir() / f"cpingpong-{digest}"


def ensure_binary() -> Path:
    """The compiled ping-pong, built now if not cached; PeerUnavailable if it cannot be."""
    exe = binary_path()
    if exe.exists():
        return exe
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("cc")
    if cc is None:
        raise PeerUnavailable("no C compiler: 'cc' not found on PATH")
    exe.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=exe.parent) as tmp:
        src, out = Path(tmp) / "pp.c", Path(tmp) / "pp"
        src.write_text(C_SOURCE)
        r = subprocess.run([cc, "-O2", "-o", str(out), str(src)], capture_output=True,
                           text=True, timeout=120, check=False)
        if r.returncode != 0:
            raise PeerUnavailable(f"cc -O2 failed: {r.stderr.strip()[-500:]}")
        os.replace(out, exe)  # atomic: a concurrent build never sees half a binary
    return exe


def _run(mode: str, args: list[str], placement: Placement) -> Stat:
    exe = str(ensure_binary())
    cpus = cpu_sets(placement)
    with pinned_self(cpus[1] if cpus else None):  # children inherit the affinity
        server = spawn([exe, "server"])
    try:
        assert server.stdout is not None
        port = server.stdout.readline().decode().strip()
        if not port:
            raise PeerUnavailable("C server did not start: "
                                  + (server.stderr.read().decode() if server.stderr else ""))
        with pinned_self(cpus[0] if cpus else None):
            client = spawn([exe, mode, port, *args])
        try:
            out, err = client.communicate(timeout=300)
        finally:
            reap(client)
        if client.returncode != 0:
            raise RuntimeError(f"C {mode} client failed ({client.returncode}): {err.decode()}")
        med, lo, hi, n = out.decode().split()
        return Stat(float(med), float(lo), float(hi), int(n))
    finally:
        reap(server)


def rtt_us(size: int, reps: int = 5, iters: int = 200, placement: Placement = DEFAULT) -> Stat:
    """C round trip of a ``size``-byte payload over loopback TCP, µs."""
    return _run("latency", [str(reps), str(iters), str(size)], placement)


def bandwidth_gbps(size: int, reps: int = 5, placement: Placement = DEFAULT) -> Stat:
    """C one-way transfer of ``size`` bytes over loopback TCP, GB/s (1e9 bytes/s)."""
    return _run("bandwidth", [str(reps), str(size)], placement)
