#!/usr/bin/env python3
"""hostile_server.py PORTFILE KIND: a fake Redis on 127.0.0.1 (a free port,
written to PORTFILE) that answers every command badly, for the CLI suite
test_cli_hostile.sh.  KIND:
  huge-arrays  "*2147483647\\r\\n" seven times (nested arrays of 2^31 slots)
  huge-bulk    "$2000000000\\r\\n" and then bytes as fast as it can
  drip         "$100000\\r\\n" and then one byte every 50 ms"""
import socket, sys, threading, time

portfile, kind = sys.argv[1], sys.argv[2]


def serve(conn):
    try:
        conn.recv(65536)
        if kind == "huge-arrays":
            conn.sendall(b"*2147483647\r\n" * 7)
            time.sleep(60)
        elif kind == "huge-bulk":
            conn.sendall(b"$2000000000\r\n")
            chunk = b"x" * 65536
            while True:
                conn.sendall(chunk)
        elif kind == "drip":
            conn.sendall(b"$100000\r\n")
            while True:
                conn.sendall(b"x")
                time.sleep(0.05)
    except OSError:
        pass
    finally:
        conn.close()


s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(16)
with open(portfile + ".tmp", "w") as f:
    f.write(str(s.getsockname()[1]))
import os
os.rename(portfile + ".tmp", portfile)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
