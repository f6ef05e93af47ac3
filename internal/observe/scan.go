package observe

// A response's JSON-RPC message, read once as it streams past.
//
// The observer needs little of a response: its id, whether it is a result
// or an error (and the error's code and message), the result's isError,
// the ask's structuredContent.run_id and its usage (structuredContent's
// usage, nested_usage and step_usage, or _meta["run.switchboard/usage"]),
// and, for the run record, the result itself when it is small enough to
// be kept (maxScrubbed). msgScan reads the bytes once, in the order they
// pass, with a state machine that knows only the four objects those
// members live in (the message, its result, the result's
// structuredContent and _meta). Everything else is skipped by counting
// brackets outside strings, and nothing of it is copied: what is captured
// is each wanted member's text, each bounded, and the whole message only
// while it is under keepMessage. So a 1 MB result costs one pass over its
// bytes and no allocation that grows with it, wherever in it the usage
// sits (before the answer, after it, or in _meta at either end).
//
// Keys are matched exactly (JSON-RPC's and MCP's members are
// case-sensitive), after unescaping when a key has a backslash; a
// duplicate member's last value wins, as in encoding/json. A message that
// is not a JSON object, or is malformed before the members are read, is no
// response.

import (
	"bytes"
	"encoding/json"

	"github.com/switchboard-run/switchboard/internal/studioapi"
	"github.com/switchboard-run/switchboard/runtime"
)

// pathCode names where a value sits in the message; pOther is anywhere
// the observer does not look.
type pathCode uint8

const (
	pOther pathCode = iota
	pRoot
	pResult     // root.result
	pStructured // result.structuredContent
	pMeta       // result._meta
	pErrorObj   // root.error, an object
	// Captured members, each bounded by capLimit.
	pID
	pMethod
	pError // root.error, not an object (the studio's {"error": "..."})
	pErrCode
	pErrMessage
	pIsError
	pRunID
	pUsage
	pNested
	pSteps
	pMetaUsage
	nPaths
)

// capLimit bounds each captured member. A message past its bound is
// truncated (ids, strings: see decodeString) or taken as absent (usage).
var capLimit = [nPaths]int{
	pID: 1 << 10, pMethod: 256, pError: 4 << 10, pErrCode: 64, pErrMessage: 4 << 10,
	pIsError: 16, pRunID: 1 << 10, pUsage: 4 << 10, pNested: 4 << 10,
	// step_usage: maxStepUsage steps are kept, about 200 bytes each.
	pSteps: 64 << 10, pMetaUsage: 4 << 10,
}

// keepMessage bounds the copy of the whole message: past it the result is
// too large to keep (Runs keeps no result over maxScrubbed), so only its
// size is counted. The slack is the envelope around the result.
const keepMessage = maxScrubbed + 4<<10

func child(parent pathCode, key []byte) pathCode {
	switch parent {
	case pRoot:
		switch string(key) {
		case "id":
			return pID
		case "method":
			return pMethod
		case "result":
			return pResult
		case "error":
			return pError // pErrorObj when it opens an object
		}
	case pResult:
		switch string(key) {
		case "isError":
			return pIsError
		case "structuredContent":
			return pStructured
		case "_meta":
			return pMeta
		}
	case pStructured:
		switch string(key) {
		case "run_id":
			return pRunID
		case "usage":
			return pUsage
		case "nested_usage":
			return pNested
		case "step_usage":
			return pSteps
		}
	case pMeta:
		if string(key) == runtime.UsageMetaKey {
			return pMetaUsage
		}
	case pErrorObj:
		switch string(key) {
		case "code":
			return pErrCode
		case "message":
			return pErrMessage
		}
	}
	return pOther
}

// objectPath reports whether an object at p is parsed member by member.
func objectPath(p pathCode) bool {
	return p == pRoot || p == pResult || p == pStructured || p == pMeta || p == pErrorObj
}

type scanState uint8

const (
	sValue   scanState = iota // a value is expected (code: where)
	sKey                      // a key or, first in an object, '}'
	sKeyNext                  // a key, after ','
	sKeyStr                   // inside a key
	sColon                    // ':' after a key
	sAfter                    // ',' or '}' after a member's value
	sSkip                     // inside a value that is not parsed
	sDone                     // the message ended
	sBad                      // not a message
)

// msgScan reads one message. The zero value is ready; reset reuses it.
type msgScan struct {
	st    scanState
	code  pathCode   // the value expected (sValue) or skipped (sSkip)
	stack []pathCode // the parsed objects open, outermost first; at most 3
	key   []byte     // the key being read, up to maxKey
	keyOK bool       // key fits and has no escape still open
	kEsc  bool       // the key has a backslash (unescape before matching)
	esc   bool       // the previous byte in a string was a backslash

	// Skipping a value: its nesting depth, whether inside a string, and
	// whether it is a bare literal (true, 12, null), which ends at the
	// first delimiter.
	depth   int
	inStr   bool
	literal bool

	n int // bytes seen
	// whole is the message while n <= keepMessage: a copy of each piece
	// fed, so that nothing is copied again as it grows.
	whole [][]byte
	over  bool // the message is larger than keepMessage

	// What was captured, by path, and whether it fit.
	got  [nPaths][]byte
	seen [nPaths]bool
	full [nPaths]bool // past capLimit

	resultStart, resultEnd int  // offsets of the result in the message; -1: none
	resultKind             byte // the result's first byte ('{', 'n' for null, ...)
	errorObj               bool // the message has an error object

	// stop, when set, is asked after the id and method are read whether
	// the rest can be skipped (not the response wanted).
	stop func(*msgScan) bool
}

const maxKey = 64

func (s *msgScan) reset() {
	stack := s.stack[:0]
	*s = msgScan{stack: stack, stop: s.stop}
	s.code = pRoot
	s.resultStart, s.resultEnd = -1, -1
}

// expect tells the scan the message's length when it is known: a message
// too large to keep is not copied at all.
func (s *msgScan) expect(n int64) {
	if n > keepMessage {
		s.over = true
	}
}

// feed reads the next bytes of the message.
func (s *msgScan) feed(p []byte) {
	if s.st == sDone || s.st == sBad {
		return
	}
	if !s.over {
		if s.n+len(p) > keepMessage {
			s.over, s.whole = true, nil
		} else {
			s.whole = append(s.whole, bytes.Clone(p))
		}
	}
	base := s.n
	s.n += len(p)
	// capFrom is where the captured member's bytes in p start, -1: none.
	capFrom := -1
	if s.st == sSkip && s.code >= pID {
		capFrom = 0
	}
	flush := func(to int) {
		if capFrom >= 0 && to > capFrom {
			s.capture(p[capFrom:to])
		}
		capFrom = -1
	}
	for i := 0; i < len(p); {
		switch s.st {
		case sDone, sBad:
			flush(i)
			return
		case sSkip:
			j, end := s.skip(p[i:])
			i += j
			if !end {
				continue
			}
			flush(i)
			if s.code == pResult {
				s.resultEnd = base + i
			}
			s.valueEnded()
		case sKeyStr:
			j := i
			for ; j < len(p); j++ {
				c := p[j]
				if s.esc {
					s.esc = false
				} else if c == '\\' {
					s.esc, s.kEsc = true, true
				} else if c == '"' {
					break
				}
			}
			if len(s.key)+j-i <= maxKey {
				s.key = append(s.key, p[i:j]...)
			} else {
				s.keyOK = false
			}
			if j == len(p) {
				i = j
				continue
			}
			i = j + 1
			s.st = sColon
		default:
			c := p[i]
			if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
				i++
				continue
			}
			switch s.st {
			case sValue:
				if c == '{' && objectPath(s.code) {
					if s.code == pResult {
						s.resultStart, s.resultKind = base+i, c
					}
					s.stack = append(s.stack, s.code)
					s.st = sKey
					i++
					continue
				}
				if s.code == pError && c == '{' {
					s.errorObj, s.seen[pError] = true, false
					s.stack = append(s.stack, pErrorObj)
					s.st = sKey
					i++
					continue
				}
				if s.code == pRoot {
					s.st = sBad // a message is an object
					continue
				}
				if s.code == pResult {
					s.resultStart, s.resultKind = base+i, c
				}
				if s.code == pError {
					s.errorObj = false
				}
				if s.code == pStructured || s.code == pMeta || s.code == pErrorObj {
					s.code = pOther // not an object: nothing to find in it
				}
				if s.code >= pID {
					s.seen[s.code], s.got[s.code], s.full[s.code] = true, s.got[s.code][:0], false
					capFrom = i
				}
				s.st, s.depth, s.inStr, s.esc = sSkip, 0, false, false
				s.literal = c != '{' && c != '[' && c != '"'
			case sKey, sKeyNext:
				switch {
				case c == '"':
					s.st, s.key, s.keyOK, s.kEsc, s.esc = sKeyStr, s.key[:0], true, false, false
				case c == '}' && s.st == sKey:
					s.objectEnded(base + i)
				default:
					s.st = sBad
					continue
				}
				i++
			case sColon:
				if c != ':' {
					s.st = sBad
					continue
				}
				s.code = pOther
				if s.keyOK {
					s.code = child(s.stack[len(s.stack)-1], s.keyBytes())
				}
				s.st = sValue
				i++
			case sAfter:
				switch c {
				case ',':
					s.st = sKeyNext
				case '}':
					s.objectEnded(base + i)
				default:
					s.st = sBad
					continue
				}
				i++
			}
		}
	}
	flush(len(p))
}

// keyBytes is the key as matched: unescaped when it has a backslash.
func (s *msgScan) keyBytes() []byte {
	if !s.kEsc {
		return s.key
	}
	var k string
	q := make([]byte, 0, len(s.key)+2)
	q = append(append(append(q, '"'), s.key...), '"')
	if json.Unmarshal(q, &k) != nil {
		return nil
	}
	return []byte(k)
}

// skip advances over the value being skipped; it returns how many bytes
// of p it used and whether the value ended (a literal ends before the
// byte that ends it, which is left to the caller).
func (s *msgScan) skip(p []byte) (int, bool) {
	if s.literal {
		for i, c := range p {
			switch c {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i, true
			}
		}
		return len(p), false
	}
	i := 0
	for i < len(p) {
		if s.inStr {
			if s.esc {
				s.esc = false
				i++
				continue
			}
			j := bytes.IndexAny(p[i:], "\"\\")
			if j < 0 {
				return len(p), false
			}
			i += j
			if p[i] == '\\' {
				s.esc = true
				i++
				continue
			}
			s.inStr = false
			i++
			if s.depth == 0 {
				return i, true // a string value ended
			}
			continue
		}
		j := bytes.IndexAny(p[i:], "\"{}[]")
		if j < 0 {
			return len(p), false
		}
		i += j
		switch p[i] {
		case '"':
			s.inStr = true
		case '{', '[':
			s.depth++
		default:
			s.depth--
			if s.depth <= 0 {
				return i + 1, true
			}
		}
		i++
	}
	return len(p), false
}

func (s *msgScan) capture(b []byte) {
	c := s.code
	if s.full[c] {
		return
	}
	if room := capLimit[c] - len(s.got[c]); len(b) > room {
		b, s.full[c] = b[:room], true
	}
	s.got[c] = append(s.got[c], b...)
}

// valueEnded follows the end of a member's value (or of the message).
func (s *msgScan) valueEnded() {
	if len(s.stack) == 0 {
		s.st = sDone
		return
	}
	s.st = sAfter
	if s.stop != nil && len(s.stack) == 1 && (s.code == pID || s.code == pMethod) && s.stop(s) {
		s.st = sDone
	}
}

// objectEnded closes the innermost parsed object, whose '}' is at off.
func (s *msgScan) objectEnded(off int) {
	closed := s.stack[len(s.stack)-1]
	s.stack = s.stack[:len(s.stack)-1]
	if closed == pResult {
		s.resultEnd = off + 1
	}
	s.code = closed
	s.valueEnded()
}

// complete reports whether the whole message was read.
func (s *msgScan) complete() bool { return s.st == sDone }

// member returns a captured member's text, and false when it is absent or
// was past its bound.
func (s *msgScan) member(p pathCode) ([]byte, bool) {
	return s.got[p], s.seen[p] && !s.full[p]
}

// result is a copy of the result's text when the message was kept whole.
func (s *msgScan) result() []byte {
	if s.over || s.resultStart < 0 || s.resultEnd <= s.resultStart || s.resultEnd > s.n {
		return nil
	}
	out := make([]byte, 0, s.resultEnd-s.resultStart)
	off := 0
	for _, piece := range s.whole {
		from, to := max(s.resultStart-off, 0), min(s.resultEnd-off, len(piece))
		if from < to {
			out = append(out, piece[from:to]...)
		}
		off += len(piece)
	}
	return out
}

// resultSize is the result's length in bytes, kept or not.
func (s *msgScan) resultSize() int {
	if s.resultStart < 0 || s.resultEnd <= s.resultStart {
		return 0
	}
	return s.resultEnd - s.resultStart
}

// rpcError is the error object's code and message.
func (s *msgScan) rpcError() *rpcErrorBody {
	var e rpcErrorBody
	if raw, ok := s.member(pErrCode); ok {
		_ = json.Unmarshal(raw, &e.Code)
	}
	if s.seen[pErrMessage] {
		e.Message, _ = decodeString(s.got[pErrMessage], s.full[pErrMessage])
	}
	return &e
}

// decodeString decodes a captured JSON string, even one cut at its bound
// (its text up to the cut); ok is false for anything but a string.
func decodeString(raw []byte, cut bool) (string, bool) {
	if cut {
		// Drop a partial escape at the cut, then close the string.
		if i := bytes.LastIndexByte(raw, '\\'); i >= 0 && len(raw)-i < 6 {
			raw = raw[:i]
		}
		raw = append(raw[:len(raw):len(raw)], '"')
	}
	var v string
	if json.Unmarshal(raw, &v) != nil {
		return "", false
	}
	return v, true
}

// usage reads the ask's usage from the captured members, as usageOf reads
// it from a whole result: the structured result's, else _meta's.
func (s *msgScan) usage() turnUsage {
	var u turnUsage
	if raw, ok := s.member(pUsage); ok {
		if json.Unmarshal(raw, &u.Usage) != nil {
			return s.metaUsage()
		}
		if u.Usage != nil {
			// The other members count only with a usage; a member of the
			// wrong type makes it no usage, as in usageOf.
			if raw, ok := s.member(pNested); ok && json.Unmarshal(raw, &u.NestedUsage) != nil {
				return s.metaUsage()
			}
			if raw, ok := s.member(pSteps); ok && json.Unmarshal(raw, &u.StepUsage) != nil {
				return s.metaUsage()
			}
			return u
		}
	}
	return s.metaUsage()
}

func (s *msgScan) metaUsage() turnUsage {
	raw, ok := s.member(pMetaUsage)
	if !ok {
		return turnUsage{}
	}
	var u studioapi.Usage
	if json.Unmarshal(raw, &u) != nil {
		return turnUsage{}
	}
	return turnUsage{Usage: &u}
}
