"""bench_etcd3gw.py -- python3-etcd3gw's Lock on the etcd at
$FENCE_BENCH_ETCD ("host:port"), for bench_etcd: acquire + release of one
name per cycle in one process (etcd3gw's calls: lease grant, the acquire
txn, the release txn; it revokes no lease).  Prints "name value unit"."""
import os
import time

from etcd3gw.client import Etcd3Client
from etcd3gw.lock import Lock

host, port = os.environ["FENCE_BENCH_ETCD"].split(":")
# etcd 3.4 serves the gateway under /v3/ (etcd3gw 2.0 defaults to /v3alpha/).
client = Etcd3Client(host=host, port=int(port), api_path="/v3/")
N = 300
for warm in (True, False):
    t0 = time.monotonic()
    for _ in range(30 if warm else N):
        lock = Lock("bench-etcd3gw", ttl=10, client=client)
        if not lock.acquire():
            raise SystemExit("etcd3gw: acquire failed")
        lock.release()
    t = time.monotonic() - t0
print("etcd3gw_lock_cycle_us %.1f us" % (t / N * 1e6))
