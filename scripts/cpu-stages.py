#!/usr/bin/env python3
"""Where a grab's CPU goes: servers under `surge bench http` load, sampled with perf, each
sample put in one stage of the grab path; CPU per grab from /proc over the same window.

  cpu-stages.py record DIR 'name=PID,...' -- <surge bench http flags>
      runs `$SURGE_BIN bench http ...` (SURGE_BIN: surge on PATH), samples utime+stime of the
      named server processes and of the floors' child (-floors -floors-process) every 0.25 s,
      and perf-records all of them (perf record -e cpu-clock -F 999 --call-graph fp) into DIR.
  cpu-stages.py report DIR RATE [TRIM] [-top N]
      per process: the windows of its grab steps (the seconds where its grab handler shows in at
      least 40 % as many samples as in its busiest second, runs of them at least 0.6 times the
      longest run, TRIM seconds (3) cut from each end: one per step, -repeat N gives N), its
      CPU per grab over them at RATE grabs/s (the steps must have kept the rate: check
      sent_rps), each step's and all together, and that CPU split by stage, as µs per grab.

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
    samples, rows, seen = [], [], 0
    while bench.poll() is None:
        now = time.monotonic()
        samples.append([now] + [cpu(p) for p in pids.values()])
        lines = open(f'{out}/bench.out').read().split('\n')[:-1]  # complete lines only
        rows += [[now, l] for l in lines[seen:] if ROW.match(l)]  # a step's row prints as it ends
        seen = len(lines)
        time.sleep(0.25)
    perf.send_signal(signal.SIGINT)
    perf.wait()
    json.dump({'pids': pids, 'names': list(pids), 'samples': samples, 'rows': rows, 'rc': bench.returncode},
              open(f'{out}/cpu.json', 'w'))
    print('bench http exited', bench.returncode, pids)


# a step's row in bench http's output: target [round/rounds] rate sent ...
ROW = re.compile(r'^  (floor0|floor2|\S*?https?://\S+|…\S+)( \[\d+/\d+\])?\s+[\d.]+\s+(\d+)\s')
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
    if frames and frames[0].startswith('K:') and not any(SYSCALL.match(f) or f.startswith('runtime.') for f in go[:2]):
        return 'kernel: interrupts, page faults (in Go code)'
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
    meta['dir'] = d
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
    if meta.get('rows'):
        return report_rows(meta, samples, top)
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
        longest = max(z - a for a, z in runs)
        # every step of the process (-repeat N: N of them), each trimmed at both ends
        windows = [(a + trim, z + 1 - trim) for a, z in runs if z - a >= 0.6 * longest and z + 1 - a > 2 * trim]
        pts = [(c[0], c[i]) for c in cs if c[i] is not None]

        def cpu_at(t):
            for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
                if x0 <= t <= x1:
                    return y0 + (y1 - y0) * (t - x0) / (x1 - x0)
        spans = [(t1 - t0, cpu_at(t1) - cpu_at(t0)) for t0, t1 in windows]
        each = [c / (w * rate) * 1e6 for w, c in spans]
        span, cpu = sum(w for w, _ in spans), sum(c for _, c in spans)
        per = cpu / (span * rate) * 1e6
        win = [s for s in mine if any(t0 <= s[1] < t1 for t0, t1 in windows)]
        n = len(win)
        cnt = collections.Counter(classify(s[2]) for s in win)
        res[name] = dict(windows=len(windows), window_s=span, cores=cpu / span, us_per_grab=per,
                         us_per_grab_each=each, samples=n, stages={k: v / n * per for k, v in cnt.items()})
        print(f'== {name}: {len(windows)} step(s), {span:.0f} s, {cpu / span:.2f} cores, {per:.1f} cpu-µs per grab at {rate:g}/s '
              f'(each step: {", ".join(f"{x:.1f}" for x in each)}), {n} samples')
        print_stages(win, per, top)
    json.dump(res, open(f'{d}/stages.json', 'w'), indent=1)


def print_stages(win, per, top):
    """Prints the samples' split by stage as shares of per µs, and with top the heaviest
    innermost frames that decided a stage."""
    n = max(len(win), 1)
    cnt = collections.Counter(classify(s[2]) for s in win)
    for k, v in cnt.most_common():
        print(f'   {k:58s} {v / n * 100:5.1f} %  {v / n * per:6.1f} µs')
    if top:
        frames = collections.Counter()
        for s in win:
            c = classify(s[2])
            go = [f for f in s[2] if not f.startswith('K:')]
            frames[c if c.startswith(('sys', 'sched', 'GC', 'kernel')) else
                   next((f for f in go if any(p.search(f) for _, p in STAGES)), c)] += 1
        print('   innermost frames of a stage:')
        for k, v in frames.most_common(top):
            print(f'     {v / n * per:6.1f} µs  {k[:120]}')


def report_rows(meta, samples, top):
    """CPU per request of each step, from the rows bench http printed as its steps ended: a
    step's process's CPU between the row before it and its own, over the requests it sent."""
    names, cs = meta['names'], meta['samples']
    targets = [n for n in names if n != 'floors']
    order, steps = [], collections.defaultdict(list)  # label -> [(round, µs per request, t0, t1)]
    for (t0, _), (t1, line) in zip(meta['rows'], meta['rows'][1:]):
        m = ROW.match(line)
        label = m.group(1)
        if label not in order:
            order.append(label)
        proc = 'floors' if label in ('floor0', 'floor2') else targets[[l for l in order if not l.startswith('floor')].index(label)]
        i = names.index(proc) + 1
        c0 = next(c[i] for c in reversed(cs) if c[0] <= t0 and c[i] is not None)
        c1 = next(c[i] for c in reversed(cs) if c[0] <= t1 and c[i] is not None)
        name = label if label.startswith('floor') else proc
        steps[name].append(((m.group(2) or '').strip(), (c1 - c0) / int(m.group(3)) * 1e6, t0, t1, proc))
    res = {}
    for name, st in steps.items():
        each = [x[1] for x in st]
        win = [s for s in samples if s[0] == st[0][4] and any(t0 <= s[1] < t1 for _, _, t0, t1, _ in st)]
        n = max(len(win), 1)
        med = sorted(each)[len(each) // 2]
        cnt = collections.Counter(classify(s[2]) for s in win)
        res[name] = dict(us_per_request_each=each, us_per_request_median=med, samples=len(win),
                         stages={k: v / n * med for k, v in cnt.items()})
        print(f'== {name}: cpu-µs per request, each step: {", ".join(f"{x:.1f}" for x in each)}; median {med:.1f}; {len(win)} samples')
        print_stages(win, med, top)
    if 'floor2' in steps:
        f2 = [x[1] for x in steps['floor2']]
        for name in targets:
            if name in steps and len(steps[name]) == len(f2):
                r = [x[1] / y for x, y in zip(steps[name], f2)]
                print(f'== {name} ÷ floor2, step by step: {", ".join(f"{x:.2f}" for x in r)}; median {sorted(r)[len(r) // 2]:.2f}')
    json.dump(res, open(f'{meta["dir"]}/stages.json', 'w'), indent=1)


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
