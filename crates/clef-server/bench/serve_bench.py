"""Server overhead and queueing on the tiny fixture model, measured in one run.

Starts target/release/clef serve on a free loopback port, sends 20 warm-up and 200 sequential
requests (golden a01, 445 tokens) over one keep-alive connection, then 8 clients x 50 requests
at once, and compares client-side latency with the engine's own compute time from the server's
JSON log. Usage, from the repository root after `cargo build --release -p clef-cli`:

    python3 crates/clef-server/bench/serve_bench.py
"""
import json, subprocess, time, http.client, threading, statistics, os
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))
BIN = os.path.join(ROOT, 'target/release/clef')
MODEL = os.path.join(ROOT, 'tests/fixtures/models/tiny-a')
LOG = os.path.join(ROOT, 'target/serve_bench.log')
g = json.load(open(os.path.join(ROOT, 'tests/fixtures/golden/tiny-a/a01_support_basic.json')))
body=json.dumps(g['request']).encode()
log=open(LOG,'w')
p=subprocess.Popen([BIN,'--threads','2','serve','--model',MODEL,'--addr','127.0.0.1:0','--log-format','json'],stdout=subprocess.PIPE,stderr=log,text=True)
addr=p.stdout.readline().split()[-1]; host,port=addr.split(':')
def conn(): return http.client.HTTPConnection(host,int(port),timeout=60)
while True:
    try:
        c=conn(); c.request('GET','/readyz'); r=c.getresponse(); r.read()
        if r.status==200: break
    except Exception: pass
    time.sleep(0.01)
c=conn()
def ask(c):
    c.request('POST','/v1/systemone',body,{'content-type':'application/json'}); r=c.getresponse(); d=r.read(); assert r.status==200, d; return d
for _ in range(20): ask(c)
lat=[]
t0=time.perf_counter()
for _ in range(200):
    t=time.perf_counter(); ask(c); lat.append(time.perf_counter()-t)
seq_s=time.perf_counter()-t0
N_CLIENTS, PER=8, 50
def client():
    cc=conn()
    for _ in range(PER): ask(cc)
th=[threading.Thread(target=client) for _ in range(N_CLIENTS)]
t0=time.perf_counter()
[t.start() for t in th]; [t.join() for t in th]
conc_s=time.perf_counter()-t0
p.terminate(); p.wait()
lines=[json.loads(l) for l in open(LOG) if l.startswith('{')]
dec=[l for l in lines if l.get('message')=='decision' and l.get('status')==200]
seq=dec[20:220]
med=lambda xs: statistics.median(xs)
print(f"sequential: {len(lat)} requests, client latency median {med(lat)*1e3:.2f} ms (p95 {sorted(lat)[int(.95*len(lat))]*1e3:.2f}), server duration_ms median {med([d['duration_ms'] for d in seq]):.2f}, compute_ms median {med([d['compute_ms'] for d in seq]):.2f}, backbone {med([d['backbone_ms'] for d in seq]):.2f}, head {med([d['head_ms'] for d in seq]):.2f}, parse {med([d['parse_ms'] for d in seq]):.3f}, queue {med([d['queue_ms'] for d in seq]):.3f}")
print(f"  throughput {len(lat)/seq_s:.1f} req/s; overhead (client latency - compute) median {(med(lat)*1e3-med([d['compute_ms'] for d in seq])):.2f} ms = {(med(lat)*1e3/med([d['compute_ms'] for d in seq])-1)*100:.1f}% of compute")
conc=dec[220:]
print(f"8 clients x 50 (concurrency 1, queue 16): {len(conc)} answered in {conc_s:.2f} s = {len(conc)/conc_s:.1f} req/s ({len(conc)/conc_s/(len(lat)/seq_s):.2f}x sequential); queue_ms median {med([d['queue_ms'] for d in conc]):.1f}, compute_ms median {med([d['compute_ms'] for d in conc]):.2f}")
