#!/usr/bin/env python3
"""Where a grab's CPU goes: servers under `surge bench http` load, sampled with perf, each
sample put in one stage of the grab path; CPU per grab from /proc over the same window.

  cpu-stages.py record DIR 'name=PID,...' -- <surge bench http flags>
      runs `$SURGE_BIN bench http ...` (SURGE_BIN: surge on PATH), samples utime+stime of the
      named server processes and of the floors' child (-floors -floors-process) every 0.25 s,
      and perf-records all of them (perf record -e cpu-clock -F 999 --call-graph fp) into DIR.
  cpu-stages.py report DIR RATE [TRIM] [-top N]
      per process: the window of its grab step (the seconds where its grab handler shows in at
      least 40 % as many samples as in its busiest second, the longest such run, TRIM seconds
      (3) cut from each end), its CPU per grab over that window at RATE grabs/s (the step must
      have kept the rate: check sent_rps), and that CPU split by stage, as µs per grab.

Needs perf (Debian: linux-perf) and root, or perf_event_paranoid ≤ 1. A sample's stage is
that of the innermost frame that belongs to one (go-redis, autopipe and the batcher, auth,
GraphQL's parts, the middleware); kernel samples and syscalls are charged to the socket
they serve (HTTP, Redis), the scheduler or the log; GC by its runtime frames."""
import collections, json, os, re, signal, subprocess, sys, time


def record(out, named, args):
    os.makedirs(out, exist_ok=True)
    pids = {}
    for kv in filter(None, named.split(',')):
        k, v = kv.split('=')
        pids[k] = int(v)
    tck = os.sysconf('SC_CLK_TCK')

    def cpu(pid):
        try:
            f = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()
            return (int(f[11]) + int(f[12])) / tck
        except OSError:
            return None

    bench = subprocess.Popen([os.environ.get('SURGE_BIN', 'surge'), 'bench', 'http'] + args,
                             stdout=open(f'{out}/bench.out', 'w'), stderr=open(f'{out}/bench.err', 'w'))
    if '-floors-process' in args:  # find the floors' child
        while 'floors' not in pids and bench.poll() is None:
            for p in filter(str.isdigit, os.listdir('/proc')):
                try:
                    if 'floor-serve' in open(f'/proc/{p}/cmdline').read().split('\0') and \
                            int(open(f'/proc/{p}/stat').read().rsplit(')', 1)[1].split()[1]) == bench.pid:
                        pids['floors'] = int(p)
                except OSError:
                    pass
            time.sleep(0.2)
    perf = subprocess.Popen(['perf', 'record', '-q', '-e', 'cpu-clock', '-F', '999', '--call-graph', 'fp', '-k', 'mono',
                             '-p', ','.join(map(str, pids.values())), '-o', f'{out}/perf.data'],
                            stdout=subprocess.DEVNULL, stderr=open(f'{out}/perf.err', 'w'))
    samples = []
    while bench.poll() is None:
        samples.append([time.monotonic()] + [cpu(p) for p in pids.values()])
        time.sleep(0.25)
    perf.send_signal(signal.SIGINT)
    perf.wait()
    json.dump({'pids': pids, 'names': list(pids), 'samples': samples, 'rc': bench.returncode},
              open(f'{out}/cpu.json', 'w'))
    print('bench http exited', bench.returncode, pids)


GC = re.compile(r'runtime\.(gcBgMarkWorker|gcAssistAlloc|bgsweep|bgscavenge|gcStart|gcMarkDone|gcMarkTermination|'
                r'markroot|gcDrain|scanobject|sweepone|deductAssistCredit|forEachP|stopTheWorld)')
SYSCALL = re.compile(r'(syscall\.|internal/runtime/syscall|runtime\.(futex|epoll|usleep|nanosleep|write1|read)|internal/poll)')

# (stage, pattern) in order: a frame takes the first stage whose pattern it matches.
STAGES = [
    ('Redis client (go-redis)', r'go-redis'),
    ('admission: batcher, autopipe', r'internal/autopipe|seckill\.\(\*batcher|seckill\.grabAlone'),
    ('admission: seckill, lua, idgen', r'surge/(lua|seckill|idgen)\.'),
    ('session lookup (auth)', r'surge/internal/auth'),
    ('floor2 handler', r'surge/internal/floor\.'),
    ('GraphQL: parse', r'gqlparser/v2/(parser|lexer)|server\.\(?\*?lexer'),
    ('GraphQL: validate', r'gqlparser/v2/validator|server\.validationRules'),
    ('GraphQL: APQ', r'server\.(persisted|apq|\(\*apq|\(\*persisted)|persistedLookup|persistedRegister'),
    ('GraphQL: limits, complexity', r'complexity|depthLimit|fullReads|sideEffect|batchLimits|documentLimits|intVariables|subscriptionsOverWebsocket'),
    ('GraphQL: transport (JSON in, out)', r'surge/internal/server\.(httpTransport|writeResponse|negotiate|requestErrors)'),
    ('middleware: metrics', r'surge/internal/server\.\(\*(metrics|httpMetrics)|prometheus'),
    ('middleware: logging', r'log/slog|surge/internal/telemetry'),
    ('middleware: request id, CORS, hosts, deadline, session', r'surge/internal/server'),
    ('GraphQL: execution, marshal', r'surge/graph\.|99designs/gqlgen|gqlparser'),
    ('consumer, database (background)', r'database/sql|go-sql-driver|entgo\.io|surge/ent'),
]
STAGES = [(s, re.compile(p)) for s, p in STAGES]


def classify(frames):
    go = [f for f in frames if not f.startswith('K:')]
    if any(GC.search(f) for f in go):
        return 'GC'
    if frames and frames[0].startswith('K:') or any(SYSCALL.match(f) for f in go[:8]):
        for f in go:
            if 'go-redis' in f:
                return 'syscalls: Redis socket'
            if 'telemetry' in f or 'log/slog' in f:
                return 'syscalls: log'
            if 'net/http' in f:
                return 'syscalls: HTTP socket'
        return 'scheduler, netpoll (with their syscalls)' if any(f.startswith('runtime.') for f in go[:12]) else 'syscalls: other'
    for f in go:
        for s, p in STAGES:
            if p.search(f):
                return s
    if any('net/http' in f for f in go):
        return 'HTTP: net/http (parse, headers, routing, write)'
    if any(f.startswith('runtime.') for f in go):
        return 'scheduler, netpoll (with their syscalls)'
    return 'other'


def report(d, rate, trim=3.0, top=0):
    meta = json.load(open(f'{d}/cpu.json'))
    if not os.path.exists(f'{d}/perf.txt'):
        subprocess.run(f'perf script -i {d}/perf.data -F pid,time,ip,sym > {d}/perf.txt 2>/dev/null', shell=True, check=True)
    pid2name = {v: k for k, v in meta['pids'].items()}
    samples, cur = [], None
    for line in open(f'{d}/perf.txt'):
        line = line.rstrip('\n')
        m = re.match(r'\s*(\d+)\s+([\d.]+):\s*$', line)
        if m:
            if cur:
                samples.append(cur)
            cur = (pid2name.get(int(m.group(1)), '?'), float(m.group(2)), [])
        elif line.strip() and cur:
            addr, _, sym = line.strip().partition(' ')
            cur[2].append(('K:' if addr.startswith('ffffffff') else '') + (sym or '?'))
    if cur:
        samples.append(cur)
    names, cs, res = meta['names'], meta['samples'], {}
    for i, name in enumerate(names, 1):
        mine = [s for s in samples if s[0] == name]
        marker = 'floor.(*Grab).ServeHTTP' if name == 'floors' else 'seckillVoucher'
        busy = collections.Counter(int(s[1]) for s in mine if any(marker in f for f in s[2]))
        if not busy:
            continue
        secs = sorted(k for k, v in busy.items() if v >= 0.4 * max(busy.values()))
        runs, start = [], secs[0]
        for a, b in zip(secs, secs[1:] + [None]):
            if b != a + 1:
                runs.append((start, a))
                start = b
        a, z = max(runs, key=lambda r: r[1] - r[0])
        t0, t1 = a + trim, z + 1 - trim
        pts = [(c[0], c[i]) for c in cs if c[i] is not None]

        def cpu_at(t):
            for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
                if x0 <= t <= x1:
                    return y0 + (y1 - y0) * (t - x0) / (x1 - x0)
        cpu = cpu_at(t1) - cpu_at(t0)
        per = cpu / ((t1 - t0) * rate) * 1e6
        win = [s for s in mine if t0 <= s[1] < t1]
        n = len(win)
        cnt = collections.Counter(classify(s[2]) for s in win)
        res[name] = dict(window_s=t1 - t0, cores=cpu / (t1 - t0), us_per_grab=per, samples=n,
                         stages={k: v / n * per for k, v in cnt.items()})
        print(f'== {name}: {t1 - t0:.0f} s window, {cpu / (t1 - t0):.2f} cores, {per:.1f} cpu-µs per grab at {rate:g}/s, {n} samples')
        for k, v in cnt.most_common():
            print(f'   {k:58s} {v / n * 100:5.1f} %  {v / n * per:6.1f} µs')
        if top:
            frames = collections.Counter()
            for s in win:
                c = classify(s[2])
                go = [f for f in s[2] if not f.startswith('K:')]
                frames[c if c.startswith(('sys', 'sched', 'GC')) else
                       next((f for f in go if any(p.search(f) for _, p in STAGES)), c)] += 1
            print('   innermost frames of a stage:')
            for k, v in frames.most_common(top):
                print(f'     {v / n * per:6.1f} µs  {k[:120]}')
    json.dump(res, open(f'{d}/stages.json', 'w'), indent=1)


if __name__ == '__main__':
    a = sys.argv[1:]
    if a[:1] == ['record'] and '--' in a:
        record(a[1], a[2], a[a.index('--') + 1:])
    elif a[:1] == ['report'] and len(a) >= 3:
        top = 0
        if '-top' in a:
            top = int(a[a.index('-top') + 1])
            del a[a.index('-top'):a.index('-top') + 2]
        report(a[1], float(a[2]), float(a[3]) if len(a) > 3 else 3.0, top)
    else:
        sys.exit(__doc__)
