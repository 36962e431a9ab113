// The sweeper's reconcile probe: one plain read of each sale's state field, decoded here, rather
// than a script per sale. A reclaim script costs Redis about nine commands (it checks its keys'
// types, reads the clock and the state); the probe costs one, and the reconcile pass sends a
// reclaim only to the sales whose state says something may be due.

package redisinv

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/redis/rueidis"
)

// probeChunk is how many reads one pipelined round trip of the probe carries.
const probeChunk = 512

// saleProbe is what the probe tells the reconcile pass of one sale.
type saleProbe struct {
	sweep bool          // something may be due, or the sale needs a script's eyes: sweep it now
	quiet time.Duration // when not sweep: as sweepNext.quiet
}

// probeSales reads the state of each sale in ids (their segment 0) at local time now.
func (e *Engine) probeSales(ctx context.Context, ids []string, now time.Time) ([]saleProbe, error) {
	out := make([]saleProbe, len(ids))
	for from := 0; from < len(ids); from += probeChunk {
		part := ids[from:min(len(ids), from+probeChunk)]
		cmds := make(rueidis.Commands, len(part))
		for i, id := range part {
			cmds[i] = e.rdb.B().Hget().Key(e.keys(id)[0]).Field("st").Build()
		}
		cctx, cancel := context.WithTimeout(ctx, e.timeout) // each round trip its own bound
		results := e.rdb.DoMulti(cctx, cmds...)
		cancel()
		for i, res := range results {
			raw, err := res.ToString()
			if rueidis.IsRedisNil(err) {
				out[from+i] = saleProbe{sweep: true} // missing: the sweep hands it to the rebuilder
				continue
			}
			if err != nil {
				return nil, errUnavailable(fmt.Errorf("redisinv: probe sale %s: %w", part[i], err))
			}
			out[from+i] = probeOf(raw, e.versionFloor(part[i]).floor, now)
		}
	}
	return out, nil
}

// The fields of st (common.lua) that the probe reads.
const (
	stStarts, stEnds, stClosed, stLoading, stQlen, stNexp, stVer, stSegs, stMode, stPend = 3, 4, 9, 16, 17, 18, 19, 20, 22, 25
)

// probeOf decides from a sale's st field whether it needs a sweep: a hold (nexp), a queue (its
// end rejects it), a transfer or a collapse unfinished, a rebuild under way, a segmented sale
// (whose other segments the probe does not read), a version below one this instance has seen
// (the reclaim's check finds a Redis that went back in time), or a field it cannot read.
// Otherwise nothing is due, and the sale is quiet until its start, or for good once ended.
// Times compare with this instance's clock: the sweep that follows uses Redis'.
func probeOf(raw string, floor uint64, now time.Time) saleProbe {
	v, err := unpackInts(raw)
	if err != nil || len(v) < 20 {
		return saleProbe{sweep: true}
	}
	at := func(i int) int64 {
		if i < len(v) {
			return v[i]
		}
		return 0
	}
	if at(stLoading) == 1 || at(stQlen) > 0 || at(stNexp) != 0 || at(stSegs) > 1 || at(stPend) > 0 ||
		at(stMode) != modeSingle || uint64(max(at(stVer), 0)) < floor {
		return saleProbe{sweep: true}
	}
	ms := now.UnixMilli()
	switch {
	case at(stClosed) == 1 || ms >= at(stEnds):
		return saleProbe{quiet: -1}
	case ms < at(stStarts):
		return saleProbe{quiet: time.Duration(at(stStarts)-ms) * time.Millisecond}
	}
	return saleProbe{}
}

// unpackInts decodes a sequence of MessagePack numbers, as Lua's cmsgpack.pack writes a state:
// integers of every width, and floats (a Lua number cmsgpack did not take for an integer).
func unpackInts(b string) ([]int64, error) {
	var out []int64
	for len(b) > 0 {
		c := b[0]
		need := map[byte]int{0xcc: 1, 0xcd: 2, 0xce: 4, 0xcf: 8, 0xd0: 1, 0xd1: 2, 0xd2: 4, 0xd3: 8, 0xca: 4, 0xcb: 8}[c]
		if c <= 0x7f || c >= 0xe0 {
			out = append(out, int64(int8(c)))
			if c <= 0x7f {
				out[len(out)-1] = int64(c)
			}
			b = b[1:]
			continue
		}
		if need == 0 || len(b) < 1+need {
			return nil, errors.New("redisinv: a state field that is not a sequence of numbers")
		}
		p := []byte(b[1 : 1+need])
		var n int64
		switch c {
		case 0xcc:
			n = int64(p[0])
		case 0xcd:
			n = int64(binary.BigEndian.Uint16(p))
		case 0xce:
			n = int64(binary.BigEndian.Uint32(p))
		case 0xcf:
			n = int64(binary.BigEndian.Uint64(p))
		case 0xd0:
			n = int64(int8(p[0]))
		case 0xd1:
			n = int64(int16(binary.BigEndian.Uint16(p)))
		case 0xd2:
			n = int64(int32(binary.BigEndian.Uint32(p)))
		case 0xd3:
			n = int64(binary.BigEndian.Uint64(p))
		case 0xca:
			n = int64(math.Float32frombits(binary.BigEndian.Uint32(p)))
		case 0xcb:
			n = int64(math.Float64frombits(binary.BigEndian.Uint64(p)))
		}
		out = append(out, n)
		b = b[1+need:]
	}
	return out, nil
}
