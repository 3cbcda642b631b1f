#!/usr/bin/env python3
"""A transparent fault-injecting TCP proxy for the namespace tests.

Run inside a test host whose outgoing TCP connections an iptables REDIRECT rule sends to PORT; for each
one it connects to the original destination (SO_ORIGINAL_DST) with SO_MARK 1 (which the rule exempts)
and relays both directions, but cuts the bytes into pieces of random size (the peer sees partial reads
and writes), delays pieces by up to DELAY_MS, and now and then stalls a direction for STALL_MS.
Nothing is dropped or altered: whatever runs through it must still be correct, only slower.

usage: fault_proxy.py PORT SEED [DELAY_MS] [STALL_MS] [STALL_PROBABILITY]
"""
import random
import socket
import struct
import sys
import threading
import time

SO_ORIGINAL_DST = 80
SO_MARK = 36


def relay(src, dst, rng, delay_ms, stall_ms, stall_p, lock):
    try:
        while True:
            data = src.recv(1 << 16)
            if not data:
                break
            while data:
                with lock:
                    piece = rng.randint(1, len(data))
                    pause = rng.random() * delay_ms / 1000.0
                    stall = rng.random() < stall_p
                if stall:
                    time.sleep(stall_ms / 1000.0)
                elif pause > 0:
                    time.sleep(pause)
                dst.sendall(data[:piece])
                data = data[piece:]
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def serve(conn, rng, args, lock):
    raw = conn.getsockopt(socket.SOL_IP, SO_ORIGINAL_DST, 16)
    port, addr = struct.unpack("!2xH4s8x", raw)
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    # The client's connect already succeeded (to us), so a destination that is not listening yet is
    # retried for a while, as the client itself would have retried a refused connect.
    deadline = time.monotonic() + 30
    while True:
        up = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        up.setsockopt(socket.SOL_SOCKET, SO_MARK, 1)
        up.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            up.connect((socket.inet_ntoa(addr), port))
            break
        except OSError:
            up.close()
            if time.monotonic() > deadline:
                conn.close()
                return
            time.sleep(0.05)
    print(f"fault_proxy: relaying to {socket.inet_ntoa(addr)}:{port}", flush=True)
    for a, b in ((conn, up), (up, conn)):
        threading.Thread(target=relay, args=(a, b, rng, *args, lock), daemon=True).start()


def main():
    port, seed = int(sys.argv[1]), int(sys.argv[2])
    delay_ms = float(sys.argv[3]) if len(sys.argv) > 3 else 2.0
    stall_ms = float(sys.argv[4]) if len(sys.argv) > 4 else 300.0
    stall_p = float(sys.argv[5]) if len(sys.argv) > 5 else 0.002
    rng, lock = random.Random(seed), threading.Lock()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("0.0.0.0", port))
    listener.listen(128)
    print(f"fault_proxy: port {port} seed {seed} delay<={delay_ms}ms stall {stall_ms}ms p={stall_p}", flush=True)
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=serve, args=(conn, rng, (delay_ms, stall_ms, stall_p), lock), daemon=True).start()


if __name__ == "__main__":
    main()
