// Command goyamux is a yamux interop peer built on github.com/libp2p/go-yamux/v5.
// See ../README.md for flags, scenarios and output format.
package main

import (
	"context"
	"errors"
	"time"

	yamux "github.com/libp2p/go-yamux/v5"

	"tunnelmux.local/interop/peer"
)

type session struct{ s *yamux.Session }

func (s session) OpenStream(ctx context.Context) (peer.Stream, error) {
	st, err := s.s.OpenStream(ctx)
	if err != nil {
		return nil, err
	}
	return stream{st}, nil
}

func (s session) AcceptStream() (peer.Stream, error) {
	st, err := s.s.AcceptStream()
	if err != nil {
		return nil, err
	}
	return stream{st}, nil
}

func (s session) Ping() (time.Duration, error) { return s.s.Ping() }
func (s session) GoAway() error                { return s.s.GoAway() }
func (s session) Close() error                 { return s.s.Close() }
func (s session) CloseChan() <-chan struct{}   { return s.s.CloseChan() }

// stream adapts *yamux.Stream: CloseWrite sends FIN, Close closes both
// directions (no RST), Reset sends WindowUpdate+RST with error code 0.
type stream struct{ *yamux.Stream }

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

func main() {
	peer.Main(peer.Impl{
		Name:          "goyamux",
		Module:        "github.com/libp2p/go-yamux/v5",
		ResetMethod:   "Stream.Reset() (WindowUpdate+RST, length 0 = error code 0)",
		DefaultWindow: 16 << 20,
		Client: func(conn *peer.Tap, o peer.Options) (peer.Session, error) {
			s, err := yamux.Client(conn, config(o), nil)
			if err != nil {
				return nil, err
			}
			return session{s}, nil
		},
		Server: func(conn *peer.Tap, o peer.Options) (peer.Session, error) {
			s, err := yamux.Server(conn, config(o), nil)
			if err != nil {
				return nil, err
			}
			return session{s}, nil
		},
		IsRemoteGoAway: func(err error) bool { return errors.Is(err, yamux.ErrRemoteGoAway) },
		IsStreamReset: func(err error) bool {
			return errors.Is(err, yamux.ErrStreamReset) && !errors.Is(err, yamux.ErrRemoteGoAway)
		},
	})
}
