package peer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

func runServer(impl *Impl, cfg *config) int {
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: listen: %v\n", impl.Name, err)
		return 1
	}
	emitLine("listening on " + ln.Addr().String())
	if cfg.stdinExit {
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			os.Exit(0)
		}()
	}
	var conns atomic.Int64
	for {
		c, err := ln.Accept()
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s: accept: %v\n", impl.Name, err)
			if errors.Is(err, net.ErrClosed) {
				return 1
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go serveConn(impl, cfg, c, conns.Add(1))
	}
}

func serveConn(impl *Impl, cfg *config, c net.Conn, connID int64) {
	tap := NewTap(c)
	sess, err := impl.Server(tap, cfg.options())
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: session: %v\n", impl.Name, err)
		c.Close()
		return
	}
	var (
		accepted, completed, echoed, echoErrs, echoResets, refused atomic.Int64
		echoBytes                                                  atomic.Int64
		goawaySent                                                 atomic.Bool
		wg                                                         sync.WaitGroup
		mu                                                         sync.Mutex
		firstEchoErr                                               string
	)
	if cfg.serverOpens > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			serverOpens(impl, cfg, sess, connID)
		}()
	}
	var endErr error
	for {
		st, err := sess.AcceptStream()
		if err != nil {
			endErr = err
			break
		}
		idx := accepted.Add(1)
		if cfg.goawayAfter > 0 && idx > int64(cfg.goawayAfter) {
			refused.Add(1)
			_ = st.Reset()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := echo(st, cfg.rstAfter)
			echoBytes.Add(n)
			switch {
			case err == nil:
				echoed.Add(1)
			case errors.Is(err, errResetByServer):
				echoResets.Add(1)
			case impl.IsStreamReset(err):
				echoResets.Add(1)
			default:
				echoErrs.Add(1)
				mu.Lock()
				if firstEchoErr == "" {
					firstEchoErr = fmt.Sprintf("stream %d: %v", st.StreamID(), err)
				}
				mu.Unlock()
			}
			if cfg.goawayAfter > 0 && completed.Add(1) == int64(cfg.goawayAfter) {
				if err := sess.GoAway(); err == nil {
					goawaySent.Store(true)
				}
			}
		}()
	}
	_ = sess.Close()
	wg.Wait()
	ev := map[string]any{
		"event":         "session-end",
		"impl":          impl.Name,
		"conn":          connID,
		"accepted":      accepted.Load(),
		"echoed":        echoed.Load(),
		"echo_bytes":    echoBytes.Load(),
		"echo_errors":   echoErrs.Load(),
		"echo_resets":   echoResets.Load(),
		"refused":       refused.Load(),
		"goaway_sent":   goawaySent.Load(),
		"remote_goaway": impl.IsRemoteGoAway(endErr),
		"end":           errString(endErr),
		"wire_in":       tap.In.Map(),
		"wire_out":      tap.Out.Map(),
	}
	if firstEchoErr != "" {
		ev["first_echo_error"] = firstEchoErr
	}
	emitJSON(ev)
}

// serverOpens opens cfg.serverOpens streams towards the client, each carrying
// cfg.serverOpensSize seeded bytes, and verifies the echo.
func serverOpens(impl *Impl, cfg *config, sess Session, connID int64) {
	select {
	case <-time.After(cfg.serverOpensDelay):
	case <-sess.CloseChan():
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	pat := NewPattern(cfg.seed)
	rng := rand.New(rand.NewPCG(cfg.seed, 2))
	offs := make([]int64, cfg.serverOpens)
	for i := range offs {
		offs[i] = rng.Int64N(patternBlockSize)
	}
	start := time.Now()
	var opened, verified, refused atomic.Int64
	var mu sync.Mutex
	var firstErr string
	fail := func(s string) {
		mu.Lock()
		if firstErr == "" {
			firstErr = s
		}
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for i := 0; i < cfg.serverOpens; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			st, err := sess.OpenStream(ctx)
			if err != nil {
				if impl.IsRemoteGoAway(err) {
					refused.Add(1)
				}
				fail(fmt.Sprintf("open %d: %v", i, err))
				return
			}
			opened.Add(1)
			_ = st.SetDeadline(deadline)
			r := transfer(st, pat, offs[i], int64(cfg.serverOpensSize), cfg.chunk, true)
			if err := r.err(); err != nil {
				if impl.IsStreamReset(err) || impl.IsStreamReset(r.wErr) {
					refused.Add(1)
				}
				fail(fmt.Sprintf("stream %d (id %d): %v", i, st.StreamID(), err))
				return
			}
			verified.Add(1)
		}(i)
	}
	wg.Wait()
	ev := map[string]any{
		"event":     "server-opens",
		"impl":      impl.Name,
		"conn":      connID,
		"ok":        verified.Load() == int64(cfg.serverOpens),
		"requested": cfg.serverOpens,
		"opened":    opened.Load(),
		"verified":  verified.Load(),
		"refused":   refused.Load(),
		"bytes":     verified.Load() * int64(cfg.serverOpensSize),
		"ms":        time.Since(start).Milliseconds(),
	}
	if firstErr != "" {
		ev["error"] = firstErr
	}
	emitJSON(ev)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
