package journal

// The SQLite journal's append-only write path (Options.AppendLog,
// docs/DURABILITY.md §5). A batch of the writer is one write(2) to a
// segment file next to the database (File+SegmentSuffix), as framed
// records, one per op: a commit is then a few microseconds of encoding and
// a system call (and an fsync with PowerLossDurable), instead of a SQLite
// transaction that touches five B-trees and writes their pages to the WAL.
// The records are folded into the tables later, many batches in one
// transaction: once foldOps ops or foldBytes bytes are pending, before a
// read that could see them (sqliteStore.settle), and on Close. On Open,
// whatever a dead process appended and did not fold is folded first.
//
// A segment starts with a header naming its generation; a fold records the
// generation it folded (journal_meta 'seg_folded') in the transaction that
// writes the records, then empties the segment and starts the next
// generation. So a crash between the fold's commit and the truncation
// leaves a segment whose generation is already folded, and it is not
// folded twice (a run's row adds each batch's bytes: folding twice would
// count them twice).
//
// A frame is the length of its body (uint32), the CRC32C of the body
// (uint32), and the body: the op's run (8 bytes), then its fields. The last
// frame of the file may be torn (the process died in the middle of a
// write, or the machine lost the tail of one): a frame that runs past the
// end of the file, or a tail of zeros, is dropped; nothing was acted on
// from it, since Sync had not returned. A frame that fails its CRC with
// good frames after it is corruption: its run is marked broken once the
// rest is folded, and a frame whose length cannot be trusted (nothing
// after it parses) fails Open, naming the file and the offset, rather than
// drop what follows.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
)

// SegmentSuffix names the segment of the journal at path: path+SegmentSuffix.
const SegmentSuffix = "-seg"

const (
	segMagic  = "SBJSEG1\n"
	segHeader = len(segMagic) + 8 // magic, generation
	frameHead = 8                 // body length, CRC32C of the body
	// maxFrame bounds a frame's body: a length past it is not one the
	// writer wrote (a run's payloads are capped far below).
	maxFrame = 1 << 30
)

// Fold thresholds: the pending ops are folded into the tables in one
// transaction once there are foldOps of them or foldBytes of frames. A
// fold's cost grows with its rows, but its fixed part (BEGIN IMMEDIATE,
// the commit, the WAL's checkpoint) is paid once for all of them.
const (
	foldOps   = 2048
	foldBytes = 8 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errSegment: the segment holds a frame that cannot be read and is not
// the torn end of the last write.
var errSegment = errors.New("run journal segment corrupt")

// appendFrame appends o as a frame.
func appendFrame(b []byte, o op) []byte {
	at := len(b)
	b = append(b, make([]byte, frameHead)...)
	b = binary.BigEndian.AppendUint64(b, uint64(o.id))
	b = append(b, byte(o.kind))
	b = binary.AppendVarint(b, o.now)
	b = binary.AppendVarint(b, o.bytes)
	str := func(s []byte) { b = binary.AppendUvarint(b, uint64(len(s))); b = append(b, s...) }
	switch o.kind {
	case opStart:
		s := o.start
		for _, f := range []string{s.RunID, s.Key, s.ParentKey, s.Credential, s.Task} {
			str([]byte(f))
		}
		str(s.Settings)
		str([]byte(o.sum))
	case opEntry:
		e := o.e
		b = binary.AppendVarint(b, int64(e.seq))
		b = binary.AppendVarint(b, int64(e.step))
		for _, f := range []string{e.kind, e.callID, e.key, e.fingerprint} {
			str([]byte(f))
		}
		str(e.payload)
		str([]byte(e.sum))
	case opEnd:
		str([]byte(o.state))
		if o.result == nil {
			b = append(b, 0)
		} else {
			b = append(b, 1)
			str(o.result)
		}
		str([]byte(o.errMsg))
	}
	body := b[at+frameHead:]
	binary.BigEndian.PutUint32(b[at:], uint32(len(body)))
	binary.BigEndian.PutUint32(b[at+4:], crc32.Checksum(body, castagnoli))
	return b
}

// A bodyReader reads a frame's body; the first short read sets bad.
type bodyReader struct {
	b   []byte
	bad bool
}

func (r *bodyReader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *bodyReader) bytes() []byte {
	n, k := binary.Uvarint(r.b)
	if k <= 0 || n > uint64(len(r.b)-k) {
		r.bad = true
		return nil
	}
	v := r.b[k : k+int(n)]
	r.b = r.b[k+int(n):]
	return bytes.Clone(v)
}

func (r *bodyReader) str() string { return string(r.bytes()) }

// decodeFrame reads the op of a body whose CRC checked.
func decodeFrame(body []byte) (op, bool) {
	if len(body) < 9 {
		return op{}, false
	}
	o := op{id: int64(binary.BigEndian.Uint64(body)), kind: opKind(body[8])}
	r := &bodyReader{b: body[9:]}
	o.now, o.bytes = r.varint(), r.varint()
	switch o.kind {
	case opStart:
		s := &Start{RunID: r.str(), Key: r.str(), ParentKey: r.str(), Credential: r.str(), Task: r.str()}
		s.Settings = r.bytes()
		o.start, o.sum = s, r.str()
	case opEntry:
		o.e.seq, o.e.step = int(r.varint()), int(r.varint())
		o.e.kind, o.e.callID, o.e.key, o.e.fingerprint = r.str(), r.str(), r.str(), r.str()
		o.e.payload, o.e.sum = r.bytes(), r.str()
	case opEnd:
		o.state = State(r.str())
		if len(r.b) == 0 {
			r.bad = true
			break
		}
		has := r.b[0]
		r.b = r.b[1:]
		if has == 1 {
			o.result = r.bytes()
		}
		o.errMsg = r.str()
	default:
		return op{}, false
	}
	return o, !r.bad && len(r.b) == 0
}

// A segmentScan is what readSegment found in a segment file.
type segmentScan struct {
	gen uint64
	ops []op
	// broken are the runs of frames that failed their check with good
	// frames after them.
	broken []int64
	// torn is the size of the torn tail dropped, 0 if none.
	torn int
}

// readSegment parses a segment's contents. An empty file, or one shorter
// than a header (a segment whose header was being written), holds nothing.
func readSegment(path string, data []byte) (segmentScan, error) {
	var sc segmentScan
	if len(data) < segHeader {
		return sc, nil
	}
	if string(data[:len(segMagic)]) != segMagic {
		return sc, fmt.Errorf("run journal segment %s: not a segment (its header is %q): %w", path, data[:len(segMagic)], errSegment)
	}
	sc.gen = binary.BigEndian.Uint64(data[len(segMagic):segHeader])
	off := segHeader
	for off < len(data) {
		rest := data[off:]
		if allZero(rest) {
			sc.torn = len(rest) // the file grew, the write's bytes never reached it
			break
		}
		if len(rest) < frameHead {
			sc.torn = len(rest)
			break
		}
		n := int(binary.BigEndian.Uint32(rest))
		if n > len(rest)-frameHead {
			if n > maxFrame {
				return sc, fmt.Errorf("run journal segment %s, offset %d: a frame of %d bytes: %w", path, off, n, errSegment)
			}
			sc.torn = len(rest) // the last write, cut short
			break
		}
		body := rest[frameHead : frameHead+n]
		if crc32.Checksum(body, castagnoli) == binary.BigEndian.Uint32(rest[4:]) {
			o, ok := decodeFrame(body)
			if !ok {
				return sc, fmt.Errorf("run journal segment %s, offset %d: a frame that checks does not parse: %w", path, off, errSegment)
			}
			sc.ops = append(sc.ops, o)
			off += frameHead + n
			continue
		}
		if off+frameHead+n == len(data) {
			sc.torn = len(rest) // the last frame, its bytes partly written
			break
		}
		// Corrupt, with more after it. Its length is trusted only if a
		// good frame follows it; its run is then the body's first bytes
		// (unchecked: the run it names is marked broken, which loses at
		// worst a run that could have been resumed).
		next := rest[frameHead+n:]
		if !frameChecks(next) {
			return sc, fmt.Errorf("run journal segment %s, offset %d: a frame that does not match its CRC, and what follows it does not parse: %w", path, off, errSegment)
		}
		if len(body) >= 8 {
			sc.broken = append(sc.broken, int64(binary.BigEndian.Uint64(body)))
		}
		off += frameHead + n
	}
	return sc, nil
}

// frameChecks reports whether b starts with a whole frame that matches its
// CRC.
func frameChecks(b []byte) bool {
	if len(b) < frameHead {
		return false
	}
	n := int(binary.BigEndian.Uint32(b))
	if n > len(b)-frameHead {
		return false
	}
	return crc32.Checksum(b[frameHead:frameHead+n], castagnoli) == binary.BigEndian.Uint32(b[4:])
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// A segment is the SQLite store's append-only log, its pending ops, and
// what a read checks to know whether it must fold first. Its fields are
// guarded by sqliteStore.segMu.
type segment struct {
	path string
	f    *os.File
	gen  uint64
	size int64 // bytes written, header included
	sync bool  // fsync each append (PowerLossDurable)
	buf  []byte

	pending      []op
	pendingBytes int
	runs         map[int64]bool  // runs with pending ops
	keys         map[string]bool // idempotency keys of pending starts
	runIDs       map[string]bool // chain run ids of pending starts
	// err: an append failed and the file could not be cut back to its last
	// whole frame; nothing more is appended.
	err error
}

// openSegment opens (creating) the segment at path and returns it with
// what it holds.
func openSegment(path string, sync bool) (*segment, segmentScan, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, segmentScan{}, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		f.Close()
		return nil, segmentScan{}, err
	}
	sc, err := readSegment(path, data)
	if err != nil {
		f.Close()
		return nil, sc, err
	}
	return &segment{path: path, f: f, gen: sc.gen, size: int64(len(data)), sync: sync}, sc, nil
}

// reset empties the segment and starts generation gen.
func (s *segment) reset(gen uint64) error {
	if err := s.f.Truncate(0); err != nil {
		return err
	}
	h := append([]byte(segMagic), binary.BigEndian.AppendUint64(nil, gen)...)
	if _, err := s.f.Write(h); err != nil {
		return err
	}
	if s.sync {
		if err := s.f.Sync(); err != nil {
			return err
		}
	}
	s.gen, s.size = gen, int64(len(h))
	s.pending, s.pendingBytes = nil, 0
	s.runs, s.keys, s.runIDs = map[int64]bool{}, map[string]bool{}, map[string]bool{}
	return nil
}

// append writes ops as one write(2) and adds them to the pending ones.
func (s *segment) append(ops []op) error {
	if s.err != nil {
		return s.err
	}
	s.buf = s.buf[:0]
	for _, o := range ops {
		s.buf = appendFrame(s.buf, o)
	}
	_, err := s.f.Write(s.buf)
	if err == nil && s.sync {
		err = s.f.Sync()
	}
	if err != nil {
		// What was written of the batch is cut off, so that the next
		// append does not follow a torn frame (read back as corruption).
		if terr := s.f.Truncate(s.size); terr != nil {
			s.err = fmt.Errorf("run journal segment %s: an append failed (%w) and it could not be cut back (%w)", s.path, err, terr)
		}
		return err
	}
	s.size += int64(len(s.buf))
	s.pendingBytes += len(s.buf)
	for _, o := range ops {
		s.pending = append(s.pending, o)
		s.runs[o.id] = true
		if o.kind == opStart {
			if o.start.Key != "" {
				s.keys[o.start.Key] = true
			}
			s.runIDs[o.start.RunID] = true
		}
	}
	if cap(s.buf) > 4*foldBytes {
		s.buf = nil // one huge batch does not pin its buffer
	}
	return nil
}

func (s *segment) due() bool { return len(s.pending) >= foldOps || s.pendingBytes >= foldBytes }
