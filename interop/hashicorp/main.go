// Command hashicorp is a yamux interop peer built on github.com/hashicorp/yamux.
// See ../README.md for flags, scenarios and output format.
package main

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/hashicorp/yamux"

	"tunnelmux.local/interop/peer"
)

type session struct {
	s   *yamux.Session
	tap *peer.Tap
}

func (s session) OpenStream(ctx context.Context) (peer.Stream, error) {
	// hashicorp's OpenStream takes no context; bound it by the caller's.
	type res struct {
		st  *yamux.Stream
		err error
	}
	ch := make(chan res, 1)
	go func() {
		st, err := s.s.OpenStream()
		ch <- res{st, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, r.err
		}
		return &stream{s: r.st, tap: s.tap}, nil
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.st != nil {
				_ = r.st.Close()
			}
		}()
		return nil, ctx.Err()
	}
}

func (s session) AcceptStream() (peer.Stream, error) {
	st, err := s.s.AcceptStream()
	if err != nil {
		return nil, err
	}
	return &stream{s: st, tap: s.tap}, nil
}

func (s session) Ping() (time.Duration, error) { return s.s.Ping() }
func (s session) GoAway() error                { return s.s.GoAway() }
func (s session) Close() error                 { return s.s.Close() }
func (s session) CloseChan() <-chan struct{}   { return s.s.CloseChan() }

// stream adapts *yamux.Stream. hashicorp/yamux v0.1.x has no public Reset,
// and its Close() sends FIN (a half-close: reads keep working), so:
//   - CloseWrite and Close both map to Stream.Close (FIN);
//   - Reset injects a WindowUpdate+RST frame for the stream id into the TCP
//     byte stream at a frame boundary and abandons the stream locally
//     (the library still thinks it is open; we never touch it again).
type stream struct {
	s           *yamux.Stream
	tap         *peer.Tap
	localReset  atomic.Bool
	remoteReset atomic.Bool
}

func (st *stream) note(err error) error {
	if errors.Is(err, yamux.ErrConnectionReset) {
		st.remoteReset.Store(true)
	}
	if err != nil && st.localReset.Load() {
		return peer.ErrLocalReset
	}
	return err
}

func (st *stream) Read(b []byte) (int, error) {
	if st.localReset.Load() {
		return 0, peer.ErrLocalReset
	}
	n, err := st.s.Read(b)
	return n, st.note(err)
}

func (st *stream) Write(b []byte) (int, error) {
	if st.localReset.Load() {
		return 0, peer.ErrLocalReset
	}
	n, err := st.s.Write(b)
	return n, st.note(err)
}

func (st *stream) CloseWrite() error {
	if st.localReset.Load() {
		return peer.ErrLocalReset
	}
	return st.s.Close()
}

func (st *stream) Close() error {
	if st.localReset.Load() || st.remoteReset.Load() {
		return nil
	}
	return st.s.Close()
}

func (st *stream) Reset() error {
	if st.remoteReset.Load() || st.localReset.Swap(true) {
		return nil
	}
	err := st.tap.Inject(peer.RSTFrame(st.s.StreamID()))
	// Wake up any blocked Read/Write; they then report ErrLocalReset.
	_ = st.s.SetDeadline(time.Now())
	return err
}

func (st *stream) StreamID() uint32 { return st.s.StreamID() }

func (st *stream) SetDeadline(t time.Time) error {
	if st.localReset.Load() {
		return nil
	}
	return st.s.SetDeadline(t)
}

func config(o peer.Options) *yamux.Config {
	c := yamux.DefaultConfig()
	c.AcceptBacklog = o.Backlog
	c.EnableKeepAlive = o.KeepAlive > 0
	if o.KeepAlive > 0 {
		c.KeepAliveInterval = o.KeepAlive
	}
	if o.MaxWindow > 0 {
		c.MaxStreamWindowSize = o.MaxWindow
	}
	c.LogOutput = o.Log
	return c
}

func wrap(mk func() (*yamux.Session, error), tap *peer.Tap) (peer.Session, error) {
	s, err := mk()
	if err != nil {
		return nil, err
	}
	return session{s: s, tap: tap}, nil
}

func main() {
	peer.Main(peer.Impl{
		Name:          "hashicorp",
		Module:        "github.com/hashicorp/yamux",
		ResetMethod:   "injected WindowUpdate+RST frame (hashicorp/yamux has no public Stream.Reset); stream abandoned locally",
		DefaultWindow: 256 * 1024,
		Client: func(conn *peer.Tap, o peer.Options) (peer.Session, error) {
			return wrap(func() (*yamux.Session, error) { return yamux.Client(conn, config(o)) }, conn)
		},
		Server: func(conn *peer.Tap, o peer.Options) (peer.Session, error) {
			return wrap(func() (*yamux.Session, error) { return yamux.Server(conn, config(o)) }, conn)
		},
		IsRemoteGoAway: func(err error) bool { return errors.Is(err, yamux.ErrRemoteGoAway) },
		IsStreamReset:  func(err error) bool { return errors.Is(err, yamux.ErrConnectionReset) },
	})
}
