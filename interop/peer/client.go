package peer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// run is the state of one client scenario.
type run struct {
	impl *Impl
	cfg  *config
	ctx  context.Context
	sess Session
	tap  *Tap
	pat  *Pattern

	deadline time.Time
	phase    atomic.Value // string

	streams  atomic.Int64 // streams completed by the scenario
	bytes    atomic.Int64 // payload bytes sent (one way) by the scenario
	incoming atomic.Int64 // peer-opened streams accepted
	inEchoed atomic.Int64 // peer-opened streams echoed completely
	inBytes  atomic.Int64
	inErrs   atomic.Int64
}

type result map[string]any

var scenarioFuncs = map[string]func(*run) (result, error){
	"concurrent":  scConcurrent,
	"halfclose":   scHalfClose,
	"rst":         scRst,
	"ping":        scPing,
	"goaway":      scGoAway,
	"dribble":     scDribble,
	"largewindow": scLargeWindow,
	"throughput":  scThroughput,
	"rtt":         scRTT,
	"streams":     scStreams,
	"accept":      scAccept,
	"goaway-recv": scGoAwayRecv,
	"rst-recv":    scRstRecv,
}

var (
	summaryOnce sync.Once
	exitCode    = make(chan int, 1)
)

func runClient(impl *Impl, cfg *config) int {
	if cfg.scenario == "largewindow" && cfg.window == 0 {
		cfg.window = 16 << 20
	}
	start := time.Now()
	r := &run{impl: impl, cfg: cfg}
	r.setPhase("connect")
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	defer cancel()
	r.ctx = ctx
	r.deadline, _ = ctx.Deadline()
	base := func() result {
		w := cfg.window
		if w == 0 {
			w = uint(impl.DefaultWindow)
		}
		res := result{
			"scenario":     cfg.scenario,
			"impl":         impl.Name,
			"impl_version": impl.Version(),
			"streams":      r.streams.Load(),
			"bytes":        r.bytes.Load(),
			"ms":           time.Since(start).Milliseconds(),
			"window":       w,
		}
		if n := r.incoming.Load(); n > 0 {
			res["incoming"] = n
			res["incoming_echoed"] = r.inEchoed.Load()
		}
		if r.tap != nil {
			res["wire_in"] = r.tap.In.Map()
			res["wire_out"] = r.tap.Out.Map()
		}
		return res
	}
	finish := func(extra result, err error) {
		summaryOnce.Do(func() {
			res := base()
			for k, v := range extra {
				res[k] = v
			}
			res["ok"] = err == nil
			code := 0
			if err != nil {
				res["error"] = err.Error()
				res["phase"] = r.phase.Load()
				fmt.Fprintf(os.Stderr, "%s: scenario %s failed: %v\n", impl.Name, cfg.scenario, err)
				code = 1
			}
			emitJSON(res)
			exitCode <- code
		})
	}
	watchdog := time.AfterFunc(cfg.timeout, func() {
		finish(nil, fmt.Errorf("timeout after %s (phase %v)", cfg.timeout, r.phase.Load()))
		os.Exit(<-exitCode)
	})
	defer watchdog.Stop()

	conn, err := net.DialTimeout("tcp", cfg.connect, min(cfg.timeout, 10*time.Second))
	if err != nil {
		finish(nil, fmt.Errorf("dial %s: %w", cfg.connect, err))
		return <-exitCode
	}
	r.tap = NewTap(conn)
	r.sess, err = impl.Client(r.tap, cfg.options())
	if err != nil {
		conn.Close()
		finish(nil, fmt.Errorf("client session: %w", err))
		return <-exitCode
	}
	r.pat = NewPattern(cfg.seed)
	go r.acceptLoop()

	r.setPhase(cfg.scenario)
	extra, err := scenarioFuncs[cfg.scenario](r)
	if err == nil && cfg.scenario != "goaway" && cfg.scenario != "goaway-recv" {
		// A final round trip makes sure the peer has read everything we
		// sent before the TCP connection is closed.
		r.setPhase("final ping")
		_, _ = r.pingWithin(2 * time.Second)
	}
	watchdog.Stop()
	finish(extra, err)
	_ = r.sess.Close()
	return <-exitCode
}

func (r *run) setPhase(p string) { r.phase.Store(p) }

// acceptLoop echoes every stream the peer opens (used by "accept" and
// harmless elsewhere).
func (r *run) acceptLoop() {
	for {
		st, err := r.sess.AcceptStream()
		if err != nil {
			return
		}
		r.incoming.Add(1)
		go func() {
			_ = st.SetDeadline(r.deadline)
			n, err := echo(st, 0)
			r.inBytes.Add(n)
			if err != nil {
				r.inErrs.Add(1)
				return
			}
			r.inEchoed.Add(1)
		}()
	}
}

func (r *run) pingWithin(d time.Duration) (time.Duration, error) {
	type pr struct {
		rtt time.Duration
		err error
	}
	ch := make(chan pr, 1)
	go func() {
		rtt, err := r.sess.Ping()
		ch <- pr{rtt, err}
	}()
	select {
	case p := <-ch:
		return p.rtt, p.err
	case <-time.After(d):
		return 0, fmt.Errorf("no pong within %s", d)
	}
}

func (r *run) closed() bool {
	select {
	case <-r.sess.CloseChan():
		return true
	default:
		return false
	}
}

// echoStream opens a stream, sends n payload bytes, half-closes and verifies
// the echo.
func (r *run) echoStream(off, n int64, chunk int, verify bool) error {
	st, err := r.sess.OpenStream(r.ctx)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	_ = st.SetDeadline(r.deadline)
	res := transfer(st, r.pat, off, n, chunk, verify)
	if err := res.err(); err != nil {
		return fmt.Errorf("stream id %d: %w", st.StreamID(), err)
	}
	r.streams.Add(1)
	r.bytes.Add(n)
	return nil
}

// parallel runs f(0..n-1) with at most inflight at once; first error wins.
func parallel(n, inflight int, f func(i int) error) error {
	if inflight <= 0 || inflight > n {
		inflight = n
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
		next     atomic.Int64
	)
	for w := 0; w < inflight; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				mu.Lock()
				stop := firstErr != nil
				mu.Unlock()
				if stop {
					return
				}
				if err := f(i); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("stream #%d: %w", i, err)
					}
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}

func mibPerSec(bytes int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(int64(float64(bytes)/(1<<20)/d.Seconds()*100)) / 100
}

func scConcurrent(r *run) (result, error) {
	n := def(r.cfg.count, 500)
	rng := rand.New(rand.NewPCG(r.cfg.seed, 1))
	sizes := make([]int64, n)
	offs := make([]int64, n)
	var total, maxSeen int64
	empty := 0
	for i := range sizes {
		sizes[i] = rng.Int64N(int64(r.cfg.maxSize) + 1)
		offs[i] = rng.Int64N(patternBlockSize)
		total += sizes[i]
		maxSeen = max(maxSeen, sizes[i])
		if sizes[i] == 0 {
			empty++
		}
	}
	start := time.Now()
	err := parallel(n, def(r.cfg.inflight, n), func(i int) error {
		return r.echoStream(offs[i], sizes[i], r.cfg.chunk, true)
	})
	d := time.Since(start)
	return result{
		"planned_bytes": total, "max_stream_bytes": maxSeen, "empty_streams": empty,
		"mib_per_s": mibPerSec(r.bytes.Load(), d),
	}, err
}

func scHalfClose(r *run) (result, error) {
	n := int64(def(r.cfg.size, 128*1024))
	st, err := r.sess.OpenStream(r.ctx)
	if err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	_ = st.SetDeadline(r.deadline)
	r.setPhase("halfclose: write")
	var pos int64
	for pos < n {
		seg := r.pat.Segment(0, pos, int(min(int64(r.cfg.chunk), n-pos)))
		w, err := st.Write(seg)
		pos += int64(w)
		if err != nil {
			return nil, fmt.Errorf("write at %d: %w", pos, err)
		}
	}
	r.setPhase("halfclose: close write")
	if err := st.CloseWrite(); err != nil {
		return nil, fmt.Errorf("close write: %w", err)
	}
	_, werr := st.Write([]byte{0})
	r.setPhase("halfclose: read echo after FIN (if stuck: -size exceeds the windows)")
	buf := make([]byte, 64*1024)
	var got int64
	for {
		k, err := st.Read(buf)
		if k > 0 {
			if got+int64(k) > n || !r.pat.Verify(0, got, buf[:k]) {
				return nil, fmt.Errorf("echo mismatch/overrun at byte %d", got)
			}
			got += int64(k)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read after FIN, %d of %d bytes: %w", got, n, err)
		}
	}
	if got != n {
		return nil, fmt.Errorf("echo short: %d of %d bytes", got, n)
	}
	_ = st.Close()
	r.streams.Add(1)
	r.bytes.Add(n)
	return result{"write_after_fin_error": errString(werr), "echo_after_fin_bytes": got}, nil
}

func scRst(r *run) (result, error) {
	count := def(r.cfg.count, 1)
	size := int64(def(r.cfg.size, 64*1024))
	half := max(size/2, 2)
	want := min(int64(1024), half)
	readAfter := ""
	for i := 0; i < count; i++ {
		r.setPhase(fmt.Sprintf("rst: stream %d write partway", i))
		st, err := r.sess.OpenStream(r.ctx)
		if err != nil {
			return nil, fmt.Errorf("open: %w", err)
		}
		_ = st.SetDeadline(r.deadline)
		off := int64(i) * 7919
		if _, err := st.Write(r.pat.Segment(off, 0, int(half))); err != nil {
			return nil, fmt.Errorf("write before reset: %w", err)
		}
		r.setPhase(fmt.Sprintf("rst: stream %d read partial echo", i))
		buf := make([]byte, want)
		if _, err := io.ReadFull(st, buf); err != nil {
			return nil, fmt.Errorf("partial echo before reset: %w", err)
		}
		if !r.pat.Verify(off, 0, buf) {
			return nil, errors.New("partial echo mismatch before reset")
		}
		r.setPhase(fmt.Sprintf("rst: stream %d reset", i))
		if err := st.Reset(); err != nil {
			return nil, fmt.Errorf("reset: %w", err)
		}
		// Reads after a local reset must fail, not report EOF or data.
		var rerr error
		for rerr == nil {
			_, rerr = st.Read(buf)
		}
		if rerr == io.EOF {
			return nil, errors.New("read after reset returned EOF instead of an error")
		}
		readAfter = rerr.Error()
		r.bytes.Add(half)
	}
	r.setPhase("rst: follow-up echo stream")
	if err := r.echoStream(12345, 64*1024, r.cfg.chunk, true); err != nil {
		return nil, fmt.Errorf("session unusable after reset: %w", err)
	}
	r.setPhase("rst: follow-up ping")
	if _, err := r.pingWithin(5 * time.Second); err != nil {
		return nil, fmt.Errorf("ping after reset: %w", err)
	}
	return result{
		"resets": count, "reset_method": r.impl.ResetMethod, "read_after_reset_error": readAfter,
	}, nil
}

func scPing(r *run) (result, error) {
	n := def(r.cfg.count, 5)
	rtts := make([]int64, 0, n)
	for i := 0; i < n; i++ {
		rtt, err := r.pingWithin(time.Until(r.deadline))
		if err != nil {
			return nil, fmt.Errorf("ping %d: %w", i, err)
		}
		rtts = append(rtts, rtt.Microseconds())
	}
	res := result{"pings": n, "rtt_us": rtts}
	if n > 0 {
		var sum int64
		for _, v := range rtts {
			sum += v
		}
		res["min_us"], res["max_us"], res["avg_us"] = slices.Min(rtts), slices.Max(rtts), sum/int64(n)
	}
	return res, nil
}

func scGoAway(r *run) (result, error) {
	size := int64(def(r.cfg.size, 16*1024))
	r.setPhase("goaway: echo before")
	if err := r.echoStream(0, size, r.cfg.chunk, true); err != nil {
		return nil, fmt.Errorf("echo before GoAway: %w", err)
	}
	r.setPhase("goaway: send GoAway")
	res := result{}
	if err := r.sess.GoAway(); err != nil {
		// hashicorp may report "session shutdown" although the frame was
		// written, when the peer closes the session right on receipt (the
		// tap counts the frame once the write returns: allow a moment).
		for i := 0; i < 50 && r.tap.Out.GoAway.Load() == 0; i++ {
			time.Sleep(10 * time.Millisecond)
		}
		if r.tap.Out.GoAway.Load() == 0 {
			return nil, fmt.Errorf("GoAway: %w", err)
		}
		res["goaway_error"] = err.Error()
	}
	r.setPhase("goaway: ping after GoAway")
	if _, err := r.pingWithin(2 * time.Second); err != nil {
		res["ping_after_goaway"] = err.Error()
	} else {
		res["ping_after_goaway"] = "ok"
	}
	// Anything the peer opens from here on was opened after it processed our
	// GoAway (frames are ordered and our ping came after it).
	r.tap.StartCountingSYN()
	r.setPhase("goaway: watch for peer SYNs")
	select {
	case <-time.After(r.cfg.wait):
	case <-r.sess.CloseChan():
	}
	res["peer_closed_session"] = r.closed()
	r.setPhase("goaway: open after GoAway")
	if r.closed() {
		res["open_after_goaway"] = "session closed"
	} else if err := r.echoStream(1, size, r.cfg.chunk, true); err != nil {
		res["open_after_goaway"] = err.Error()
	} else {
		res["open_after_goaway"] = "ok"
	}
	syn := r.tap.SYNAfterMark()
	res["syn_after_goaway"] = syn
	if syn > 0 {
		return res, fmt.Errorf("peer opened %d stream(s) after receiving our GoAway", syn)
	}
	return res, nil
}

func scDribble(r *run) (result, error) {
	n := int64(def(r.cfg.size, 4096))
	if err := r.echoStream(0, n, 1, true); err != nil {
		return nil, err
	}
	return result{"writes": n}, nil
}

func scLargeWindow(r *run) (result, error) {
	n := def64(r.cfg.bytes, 32<<20)
	start := time.Now()
	if err := r.echoStream(0, n, max(r.cfg.chunk, 256*1024), true); err != nil {
		return nil, err
	}
	return result{"mib_per_s": mibPerSec(n, time.Since(start))}, nil
}

func scThroughput(r *run) (result, error) {
	n := def64(r.cfg.bytes, 64<<20)
	start := time.Now()
	if err := r.echoStream(0, n, r.cfg.chunk, r.cfg.verify); err != nil {
		return nil, err
	}
	d := time.Since(start)
	return result{"mib_per_s": mibPerSec(n, d), "verified": r.cfg.verify, "transfer_ms": d.Milliseconds()}, nil
}

func scRTT(r *run) (result, error) {
	n := def(r.cfg.count, 1000)
	size := def(r.cfg.size, 64)
	st, err := r.sess.OpenStream(r.ctx)
	if err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	_ = st.SetDeadline(r.deadline)
	buf := make([]byte, size)
	lat := make([]int64, 0, n)
	var pos int64
	for i := 0; i < n; i++ {
		msg := make([]byte, 0, size)
		for len(msg) < size {
			msg = append(msg, r.pat.Segment(0, pos+int64(len(msg)), size-len(msg))...)
		}
		t0 := time.Now()
		if _, err := st.Write(msg); err != nil {
			return nil, fmt.Errorf("round trip %d write: %w", i, err)
		}
		if _, err := io.ReadFull(st, buf); err != nil {
			return nil, fmt.Errorf("round trip %d read: %w", i, err)
		}
		lat = append(lat, time.Since(t0).Nanoseconds())
		if !r.pat.Verify(0, pos, buf) {
			return nil, fmt.Errorf("round trip %d: echo mismatch", i)
		}
		pos += int64(size)
	}
	if err := st.CloseWrite(); err != nil {
		return nil, fmt.Errorf("close write: %w", err)
	}
	if k, err := st.Read(buf); k != 0 || err != io.EOF {
		return nil, fmt.Errorf("expected EOF after round trips, got %d bytes, %v", k, err)
	}
	_ = st.Close()
	r.streams.Add(1)
	r.bytes.Add(pos)
	slices.Sort(lat)
	pct := func(p float64) int64 {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(float64(len(lat))*p))] / 1000
	}
	var sum int64
	for _, v := range lat {
		sum += v
	}
	res := result{"round_trips": n, "size": size, "p50_us": pct(0.50), "p99_us": pct(0.99)}
	if n > 0 {
		res["avg_us"], res["min_us"], res["max_us"] = sum/int64(n)/1000, lat[0]/1000, lat[n-1]/1000
	}
	return res, nil
}

func scStreams(r *run) (result, error) {
	n := def(r.cfg.count, 1000)
	size := int64(def(r.cfg.size, 1024))
	inflight := def(r.cfg.inflight, 64)
	start := time.Now()
	err := parallel(n, inflight, func(i int) error {
		return r.echoStream(int64(i)*977, size, r.cfg.chunk, true)
	})
	d := time.Since(start)
	sps := 0.0
	if d > 0 {
		sps = float64(int64(float64(r.streams.Load())/d.Seconds()*10)) / 10
	}
	return result{"streams_per_s": sps, "inflight": inflight, "size": size}, err
}

func scAccept(r *run) (result, error) {
	n := int64(r.cfg.count)
	if n <= 0 {
		return nil, errors.New("accept needs -count N (the server's -server-opens)")
	}
	for r.inEchoed.Load()+r.inErrs.Load() < n {
		select {
		case <-r.ctx.Done():
			return nil, fmt.Errorf("only %d of %d peer streams echoed", r.inEchoed.Load(), n)
		case <-time.After(5 * time.Millisecond):
		}
	}
	if e := r.inErrs.Load(); e > 0 {
		return nil, fmt.Errorf("%d of %d peer-opened streams failed", e, n)
	}
	return result{"echoed_bytes": r.inBytes.Load()}, nil
}

func scGoAwayRecv(r *run) (result, error) {
	expect := r.cfg.expect
	if expect < 0 {
		return nil, errors.New("goaway-recv needs -expect N (the server's -goaway-after)")
	}
	count := def(r.cfg.count, expect+3)
	size := int64(def(r.cfg.size, 1024))
	completed := 0
	refusal := ""
	var lastErr error
	for i := 0; i < count; i++ {
		r.setPhase(fmt.Sprintf("goaway-recv: stream %d", i))
		err := r.echoStream(int64(i)*131, size, r.cfg.chunk, true)
		if err == nil {
			completed++
			continue
		}
		lastErr = err
		switch {
		case r.impl.IsRemoteGoAway(err):
			refusal = "remote-goaway"
		case r.impl.IsStreamReset(err):
			refusal = "stream-reset"
		case r.closed():
			refusal = "session-closed"
		default:
			refusal = "other"
		}
		break
	}
	// The GoAway frame may trail a refusal RST; give it a moment.
	for i := 0; i < 100 && r.tap.In.GoAway.Load() == 0 && !r.closed(); i++ {
		time.Sleep(10 * time.Millisecond)
	}
	res := result{
		"completed": completed, "expected": expect, "refusal": refusal,
		"goaway_received": r.tap.In.GoAway.Load() > 0,
	}
	if lastErr != nil {
		res["refusal_error"] = lastErr.Error()
	}
	switch {
	case completed != expect:
		return res, fmt.Errorf("%d streams completed before refusal, expected %d (last error: %v)",
			completed, expect, lastErr)
	case refusal == "other":
		return res, fmt.Errorf("stream after GoAway failed unexpectedly: %v", lastErr)
	case r.tap.In.GoAway.Load() == 0:
		return res, errors.New("no GoAway frame received from the peer")
	}
	return res, nil
}

func scRstRecv(r *run) (result, error) {
	size := int64(def(r.cfg.size, 256*1024))
	st, err := r.sess.OpenStream(r.ctx)
	if err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	_ = st.SetDeadline(r.deadline)
	tr := transfer(st, r.pat, 0, size, r.cfg.chunk, true)
	res := result{"echoed_before_reset": tr.read, "written_before_reset": tr.written}
	if tr.readErr == nil {
		return res, errors.New("stream completed normally; expected a reset from the server (-rst-after)")
	}
	if !r.impl.IsStreamReset(tr.readErr) {
		return res, fmt.Errorf("expected a stream reset, got: %w", tr.readErr)
	}
	res["reset_error"] = tr.readErr.Error()
	r.setPhase("rst-recv: follow-up echo stream")
	if err := r.echoStream(99, int64(r.cfg.verifySize), r.cfg.chunk, true); err != nil {
		return res, fmt.Errorf("session unusable after peer reset: %w", err)
	}
	if _, err := r.pingWithin(5 * time.Second); err != nil {
		return res, fmt.Errorf("ping after peer reset: %w", err)
	}
	return res, nil
}

func def64(v, d int64) int64 {
	if v < 0 {
		return d
	}
	return v
}
