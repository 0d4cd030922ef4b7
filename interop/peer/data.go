package peer

import (
	"bytes"
	"math/rand/v2"
)

// patternBlockSize is deliberately not a power of two so that stream
// payloads do not line up with window or frame sizes.
const patternBlockSize = 1<<20 + 13

// Pattern is a seeded pseudo-random byte source: payload byte k of a stream
// with offset off is block[(off+k) % len(block)].
type Pattern struct{ block []byte }

// NewPattern builds the block for seed.
func NewPattern(seed uint64) *Pattern {
	r := rand.New(rand.NewPCG(seed, 0x7475_6e6e_656c_6d78))
	b := make([]byte, patternBlockSize)
	for i := 0; i+8 <= len(b); i += 8 {
		v := r.Uint64()
		for j := 0; j < 8; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	for i := len(b) &^ 7; i < len(b); i++ {
		b[i] = byte(r.Uint32())
	}
	return &Pattern{block: b}
}

// Segment returns up to max bytes of the payload starting at position pos
// (without copying; never empty when max > 0).
func (p *Pattern) Segment(off, pos int64, max int) []byte {
	start := int((off + pos) % int64(len(p.block)))
	end := start + max
	if end > len(p.block) {
		end = len(p.block)
	}
	return p.block[start:end]
}

// Verify checks that got equals the payload bytes at [pos, pos+len(got)).
func (p *Pattern) Verify(off, pos int64, got []byte) bool {
	for len(got) > 0 {
		seg := p.Segment(off, pos, len(got))
		if !bytes.Equal(seg, got[:len(seg)]) {
			return false
		}
		got = got[len(seg):]
		pos += int64(len(seg))
	}
	return true
}
