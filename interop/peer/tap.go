package peer

import (
	"encoding/binary"
	"net"
	"sync"
	"sync/atomic"
)

// yamux frame constants (hashicorp spec.md).
const (
	headerSize = 12

	typeData         = 0
	typeWindowUpdate = 1
	typePing         = 2
	typeGoAway       = 3

	flagSYN = 1
	flagACK = 2
	flagFIN = 4
	flagRST = 8
)

// RSTFrame encodes a Window Update frame with the RST flag for stream id.
func RSTFrame(id uint32) []byte {
	b := make([]byte, headerSize)
	b[0] = 0 // version
	b[1] = typeWindowUpdate
	binary.BigEndian.PutUint16(b[2:4], flagRST)
	binary.BigEndian.PutUint32(b[4:8], id)
	return b
}

// frameParser follows frame boundaries in one direction of a yamux byte stream.
type frameParser struct {
	hdr  [headerSize]byte
	hn   int
	skip uint32
}

func (p *frameParser) feed(b []byte, onHeader func(h []byte)) {
	for len(b) > 0 {
		if p.skip > 0 {
			n := uint32(len(b))
			if n > p.skip {
				n = p.skip
			}
			p.skip -= n
			b = b[n:]
			continue
		}
		n := copy(p.hdr[p.hn:], b)
		p.hn += n
		b = b[n:]
		if p.hn == headerSize {
			p.hn = 0
			onHeader(p.hdr[:])
			if p.hdr[1] == typeData {
				p.skip = binary.BigEndian.Uint32(p.hdr[8:12])
			}
		}
	}
}

func (p *frameParser) atBoundary() bool { return p.hn == 0 && p.skip == 0 }

// WireStats counts yamux frames seen on the wire in one direction.
type WireStats struct {
	Frames       atomic.Int64
	DataBytes    atomic.Int64
	SYN          atomic.Int64
	FIN          atomic.Int64
	RST          atomic.Int64
	Ping         atomic.Int64
	GoAway       atomic.Int64
	GoAwayCode   atomic.Int64
	MaxWindowInc atomic.Int64
}

func (w *WireStats) observe(h []byte) {
	typ := h[1]
	flags := binary.BigEndian.Uint16(h[2:4])
	length := int64(binary.BigEndian.Uint32(h[8:12]))
	w.Frames.Add(1)
	switch typ {
	case typeData, typeWindowUpdate:
		if flags&flagSYN != 0 {
			w.SYN.Add(1)
		}
		if flags&flagFIN != 0 {
			w.FIN.Add(1)
		}
		if flags&flagRST != 0 {
			w.RST.Add(1)
		}
		if typ == typeData {
			w.DataBytes.Add(length)
		} else if flags&flagRST == 0 {
			for {
				cur := w.MaxWindowInc.Load()
				if length <= cur || w.MaxWindowInc.CompareAndSwap(cur, length) {
					break
				}
			}
		}
	case typePing:
		w.Ping.Add(1)
	case typeGoAway:
		w.GoAway.Add(1)
		w.GoAwayCode.Store(length)
	}
}

// Map renders the counters for the JSON summary.
func (w *WireStats) Map() map[string]int64 {
	return map[string]int64{
		"frames":         w.Frames.Load(),
		"data_bytes":     w.DataBytes.Load(),
		"syn":            w.SYN.Load(),
		"fin":            w.FIN.Load(),
		"rst":            w.RST.Load(),
		"ping":           w.Ping.Load(),
		"goaway":         w.GoAway.Load(),
		"max_window_inc": w.MaxWindowInc.Load(),
	}
}

// Tap wraps the TCP connection under a yamux session. It counts frames in
// both directions and can inject whole frames into the outgoing byte stream
// at a frame boundary (used to send RST where the library has no Reset API).
type Tap struct {
	net.Conn

	wmu     sync.Mutex
	w       frameParser
	pending [][]byte

	r frameParser // only touched by the session's single reader goroutine

	In  WireStats
	Out WireStats

	markSYN      atomic.Bool
	synAfterMark atomic.Int64
}

// NewTap wraps conn.
func NewTap(conn net.Conn) *Tap { return &Tap{Conn: conn} }

func (t *Tap) onIn(h []byte) {
	t.In.observe(h)
	if (h[1] == typeData || h[1] == typeWindowUpdate) &&
		binary.BigEndian.Uint16(h[2:4])&flagSYN != 0 && t.markSYN.Load() {
		t.synAfterMark.Add(1)
	}
}

// Read implements net.Conn.
func (t *Tap) Read(b []byte) (int, error) {
	n, err := t.Conn.Read(b)
	if n > 0 {
		t.r.feed(b[:n], t.onIn)
	}
	return n, err
}

// Write implements net.Conn; queued injected frames are flushed at the next
// frame boundary.
func (t *Tap) Write(b []byte) (int, error) {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	n, err := t.Conn.Write(b)
	t.w.feed(b[:n], t.Out.observe)
	if err == nil && len(t.pending) > 0 && t.w.atBoundary() {
		err = t.flushPendingLocked()
	}
	return n, err
}

func (t *Tap) flushPendingLocked() error {
	for len(t.pending) > 0 {
		f := t.pending[0]
		t.pending = t.pending[1:]
		n, err := t.Conn.Write(f)
		t.w.feed(f[:n], t.Out.observe)
		if err != nil {
			return err
		}
	}
	return nil
}

// Inject writes a complete frame at the next frame boundary of the
// outgoing byte stream (immediately if the stream is at a boundary now).
func (t *Tap) Inject(frame []byte) error {
	t.wmu.Lock()
	defer t.wmu.Unlock()
	t.pending = append(t.pending, frame)
	if t.w.atBoundary() {
		return t.flushPendingLocked()
	}
	return nil
}

// StartCountingSYN starts counting stream-opening frames received from now on.
func (t *Tap) StartCountingSYN() { t.markSYN.Store(true) }

// SYNAfterMark reports how many SYN frames arrived since StartCountingSYN.
func (t *Tap) SYNAfterMark() int64 { return t.synAfterMark.Load() }
