"""The hostile-client figures of docs/server.md, measured against target/release/clef on loopback.

Each part starts its own server (tiny-a, --threads 2) so that peak-memory readings (VmHWM) are
its own:
  load       answered requests per second at client concurrency 1, 64 and 256 (default queue;
             a client that gets 429 waits its Retry-After), with every response counted
  declared   1,000 connections each declaring a 13 MiB body and sending nothing: peak RSS
  states     a 13 MB state of numbers and a 13 MB string state: status, seconds to the answer,
             peak RSS growth
  jpeg       a progressive JPEG with 1,000 scans (if tests/fixtures holds one) with --deadline 5:
             its answer, and when a good request is answered after it
Usage, from the repository root after `cargo build --release -p clef-cli`:

    python3 bench/hostile.py [load|declared|states|jpeg ...] [--seconds 30]
"""
import json, os, socket, subprocess, sys, threading, time, http.client, glob, base64

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))
BIN = os.path.join(ROOT, 'target/release/clef')
MODEL = os.path.join(ROOT, 'tests/fixtures/models/tiny-a')
GOLDEN = os.path.join(ROOT, 'tests/fixtures/golden/tiny-a')


def golden_body(name):
    return json.dumps(json.load(open(os.path.join(GOLDEN, name + '.json')))['request']).encode()


class Server:
    def __init__(self, *args, pin=None):
        self.log = open(os.path.join(ROOT, 'target/hostile_bench.log'), 'w')
        # `pin`: run the server on these CPUs only (taskset), so that a load test's own
        # clients, pinned to the others, do not take the server's cores.
        prefix = ['taskset', '-c', pin] if pin else []
        threads = str(len(pin.split(','))) if pin else '2'
        self.p = subprocess.Popen([*prefix, BIN, '--threads', threads, 'serve', '--model', MODEL, '--addr',
                                   '127.0.0.1:0', '--log-format', 'json', *args],
                                  stdout=subprocess.PIPE, stderr=self.log, text=True)
        host, port = self.p.stdout.readline().split()[-1].split(':')
        self.addr = (host, int(port))
        while self.get('/readyz')[0] != 200:
            time.sleep(0.02)

    def conn(self, timeout=120):
        return http.client.HTTPConnection(*self.addr, timeout=timeout)

    def get(self, path):
        try:
            c = self.conn(); c.request('GET', path); r = c.getresponse(); return r.status, r.read()
        except OSError:
            return 0, b''

    def post(self, body, headers=None):
        c = self.conn()
        c.request('POST', '/v1/systemone', body, {'content-type': 'application/json', **(headers or {})})
        r = c.getresponse()
        return r.status, r.getheader('retry-after'), r.read()

    def status(self, key):
        for line in open(f'/proc/{self.p.pid}/status'):
            if line.startswith(key + ':'):
                return int(line.split()[1]) * 1024
        return 0

    def stop(self):
        self.p.terminate(); self.p.wait(30)


def load(seconds, golden='a18_long_state'):
    # A request of about 10 answers a second on 2 cores, as in the measurement (11.0/s),
    # so that the figure is the server's and not the Python clients' own CPU use.
    body = golden_body(golden)
    rates = {}
    # The server on CPU 0, these clients on CPU 1: on a 2-core machine the Python clients of a
    # 256-client flood would otherwise take a good part of the server's cores, and the figure
    # would measure them.
    os.sched_setaffinity(0, {1})
    for clients in (1, 64, 256):
        s = Server(pin='0')
        for _ in range(5):
            assert s.post(body)[0] == 200
        counts = {}
        lock = threading.Lock()
        stop = time.monotonic() + seconds

        def client():
            while time.monotonic() < stop:
                try:
                    status, retry, _ = s.post(body)
                except OSError as e:
                    status, retry = f'lost: {e}', None
                with lock:
                    counts[status] = counts.get(status, 0) + 1
                if status == 429:
                    assert retry is not None, 'a 429 without Retry-After'
                    time.sleep(min(float(retry), max(0.0, stop - time.monotonic())))
        threads = [threading.Thread(target=client) for _ in range(clients)]
        t0 = time.monotonic()
        [t.start() for t in threads]; [t.join() for t in threads]
        took = time.monotonic() - t0
        answered = counts.get(200, 0)
        metrics = s.get('/metrics')[1].decode()
        counted = sum(float(l.split()[-1]) for l in metrics.splitlines()
                      if l.startswith('clef_requests_total{route="/v1/systemone"'))
        s.stop()
        rates[clients] = answered / took
        print(f'load: {clients:3} clients, {took:.1f} s: {counts}; {answered / took:.2f} answered/s; '
              f'server counted {counted:.0f} of {sum(v for k, v in counts.items() if k != 0) + 5} sent')
    os.sched_setaffinity(0, range(os.cpu_count()))
    for clients in (64, 256):
        print(f'load: concurrency {clients} / concurrency 1 = {rates[clients] / rates[1]:.3f}')


def declared():
    s = Server()
    s.post(golden_body('a11_numeric_ids'))
    before = s.status('VmRSS')
    head = (f'POST /v1/systemone HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n'
            f'content-length: {13 << 20}\r\n\r\n').encode()
    socks = []
    for _ in range(1000):
        k = socket.create_connection(s.addr); k.sendall(head); socks.append(k)
    time.sleep(3)
    print(f'declared: 1,000 connections x 13 MiB declared: RSS {before >> 20} MiB before, '
          f'{s.status("VmRSS") >> 20} MiB with them, peak {s.status("VmHWM") >> 20} MiB')
    for k in socks:
        k.close()
    s.stop()


def states():
    numbers = b'[' + b','.join([b'1'] * (13_000_000 // 2 - 8)) + b']'
    text = json.dumps('word ' * (13_000_000 // 5 - 20)).encode()
    for name, state in (('numbers', numbers), ('string', text)):
        body = (b'{"model": "clef", "state": ' + state +
                b', "questions": {"q": {"type": "noul", "instructions": "Is it?"}}}')
        s = Server()
        s.post(golden_body('a11_numeric_ids'))
        peak0 = s.status('VmHWM')
        t0 = time.monotonic()
        status, _, answer = s.post(body)
        took = time.monotonic() - t0
        grow = s.status('VmHWM') - peak0
        print(f'states: {len(body) / 1e6:.1f} MB body, state of {name}: {status} in {took:.3f} s, '
              f'peak RSS growth {grow / 2**20:.1f} MiB; {answer[:160]!r}')
        s.stop()


def jpeg():
    found = sorted(glob.glob(os.path.join(ROOT, 'tests/fixtures/**/*scans*.jpg'), recursive=True))
    if not found:
        print('jpeg: no many-scan JPEG under tests/fixtures; skipped')
        return
    data = base64.b64encode(open(found[0], 'rb').read()).decode()
    body = json.dumps({'model': 'clef', 'state': 'x', 'images': ['data:image/jpeg;base64,' + data],
                       'questions': {'q': {'type': 'noul', 'instructions': 'Is it?'}}}).encode()
    s = Server('--deadline', '5')
    good = golden_body('a11_numeric_ids')
    t0 = time.monotonic()
    status, _, answer = s.post(body)
    first = time.monotonic() - t0
    status2 = s.post(good)[0]
    second = time.monotonic() - t0
    print(f'jpeg: {os.path.relpath(found[0], ROOT)}: {status} after {first:.3f} s ({answer[:140]!r}); '
          f'a good request then {status2} at {second:.3f} s')
    s.stop()


if __name__ == '__main__':
    args = sys.argv[1:]
    seconds = 30.0
    if '--seconds' in args:
        i = args.index('--seconds'); seconds = float(args[i + 1]); del args[i:i + 2]
    parts = args or ['load', 'declared', 'states', 'jpeg']
    for part in parts:
        if part == 'load':
            load(seconds)
        else:
            globals()[part]()
