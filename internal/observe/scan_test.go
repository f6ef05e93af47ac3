package observe

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/switchboard-run/switchboard/internal/studioapi"
	swruntime "github.com/switchboard-run/switchboard/runtime"
)

// reference reads the members msgScan captures the slow, obvious way:
// each object decoded whole into a map (exact keys, the last duplicate
// winning, escapes undone).
type reference struct {
	members [nPaths][]byte
	found   [nPaths]bool
	result  []byte
}

func referenceOf(msg []byte) (reference, bool) {
	var r reference
	var root map[string]json.RawMessage
	if json.Unmarshal(msg, &root) != nil {
		return r, false
	}
	put := func(p pathCode, raw json.RawMessage, ok bool) {
		if ok {
			r.members[p], r.found[p] = raw, true
		}
	}
	obj := func(raw json.RawMessage) map[string]json.RawMessage {
		var m map[string]json.RawMessage
		if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &m) != nil {
			return nil
		}
		return m
	}
	get := func(m map[string]json.RawMessage, k string) (json.RawMessage, bool) {
		v, ok := m[k]
		return v, ok
	}
	id, ok := get(root, "id")
	put(pID, id, ok)
	method, ok := get(root, "method")
	put(pMethod, method, ok)
	if e, ok := get(root, "error"); ok {
		if eo := obj(e); eo != nil {
			c, ok := get(eo, "code")
			put(pErrCode, c, ok)
			m, ok := get(eo, "message")
			put(pErrMessage, m, ok)
		} else {
			put(pError, e, true)
		}
	}
	res, ok := get(root, "result")
	if ok {
		r.result = res
	}
	if res := obj(res); res != nil {
		v, ok := get(res, "isError")
		put(pIsError, v, ok)
		if sc := obj(res["structuredContent"]); sc != nil {
			for k, p := range map[string]pathCode{"run_id": pRunID, "usage": pUsage, "nested_usage": pNested, "step_usage": pSteps} {
				v, ok := get(sc, k)
				put(p, v, ok)
			}
		}
		if meta := obj(res["_meta"]); meta != nil {
			v, ok := get(meta, swruntime.UsageMetaKey)
			put(pMetaUsage, v, ok)
		}
	}
	return r, true
}

// scanIn feeds msg to a scan in pieces of size n.
func scanIn(msg []byte, n int) *msgScan {
	s := &msgScan{}
	s.reset()
	for b := msg; len(b) > 0; b = b[min(n, len(b)):] {
		s.feed(b[:min(n, len(b))])
	}
	return s
}

// checkScan compares what msgScan kept of msg, fed n bytes at a time,
// with the reference.
func checkScan(t *testing.T, msg []byte, n int) {
	t.Helper()
	ref, ok := referenceOf(msg)
	if !ok {
		return
	}
	s := scanIn(msg, n)
	if !s.complete() {
		t.Fatalf("a valid message of %d bytes (pieces of %d) was not read to its end", len(msg), n)
	}
	for p := pID; p < nPaths; p++ {
		got, ok := s.member(p)
		if !s.seen[p] {
			got = nil
		}
		if s.seen[p] != ref.found[p] || ok && !bytes.Equal(got, ref.members[p]) {
			t.Fatalf("member %d of %q (pieces of %d): scan %q (seen %v), reference %q (found %v)", p, msg, n, got, s.seen[p], ref.members[p], ref.found[p])
		}
		if !ok && s.seen[p] && len(ref.members[p]) <= capLimit[p] {
			t.Fatalf("member %d of %q: %d bytes taken as past the bound of %d", p, msg, len(ref.members[p]), capLimit[p])
		}
	}
	if got := s.result(); len(msg) <= keepMessage && !bytes.Equal(got, ref.result) {
		t.Fatalf("result of %q: scan %q, reference %q", msg, got, ref.result)
	}
	if s.resultSize() != len(ref.result) {
		t.Fatalf("result size of %q: scan %d, reference %d", msg, s.resultSize(), len(ref.result))
	}
}

// TestScanReadsWhatTheObserverNeeds: msgScan keeps the same members as a
// whole decode, wherever they sit, however the message is cut into
// writes, and whatever surrounds them (strings with brackets, quotes and
// escapes, duplicate and escaped keys, nesting).
func TestScanReadsWhatTheObserverNeeds(t *testing.T) {
	u := `{"requests":2,"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}`
	msgs := []string{
		`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"a \"}]{[ b\\"}],"isError":true}}`,
		`{"jsonrpc":"2.0","id":"x","result":{"structuredContent":{"answer":"]}","run_id":"R1","usage":` + u + `,"nested_usage":` + u + `,"step_usage":[{"step":1}]},"_meta":{"run.switchboard/usage":` + u + `}}}`,
		`{"result":{"_meta":{"run.switchboard/usage":` + u + `},"structuredContent":{"usage":null}},"id":7}`,
		`{"id":7,"error":{"code":-32602,"message":"bad \u00e9 \"x\""}}`,
		`{"id":null,"error":"plain"}`,
		` { "id" : 7 , "result" : { "isError" : false , "isError" : true } } `,
		`{"\u0069d":7,"result":{"isErr\u006fr":true}}`,
		`{"id":7,"result":null}`,
		`{"id":7,"result":[1,{"isError":true}]}`,
		`{"id":7,"result":{"structuredContent":"not an object","isError":true}}`,
		`{"method":"notifications/progress","params":{"id":1,"result":{"isError":true}}}`,
		`{"id":7,"result":{"a":{"b":{"c":[[[{"isError":true}]]]}},"isError":false}}`,
	}
	for _, m := range msgs {
		for _, n := range []int{1, 2, 3, 7, 64, 1 << 20} {
			checkScan(t, []byte(m), n)
		}
	}
}

// askOfSize is an ask's answer of about n bytes with its usage before or
// after the answer, as a JSON-RPC response.
func askOfSize(n int, usageFirst bool, u studioapi.Usage) []byte {
	const unit = "lorem ipsum \"dolor\" {sit} [amet] "
	text := strings.Repeat(unit, n/len(unit)+1)[:n]
	sc := map[string]any{"answer": text, "run_id": "R-big", "steps": 1}
	res := map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}, "structuredContent": sc}
	uj, _ := json.Marshal(u)
	scj, _ := json.Marshal(sc)
	if usageFirst {
		scj = append([]byte(`{"usage":`+string(uj)+`,`), scj[1:]...)
	} else {
		scj = append(scj[:len(scj)-1], []byte(`,"usage":`+string(uj)+`}`)...)
	}
	contentj, _ := json.Marshal(res["content"])
	return []byte(`{"jsonrpc":"2.0","id":7,"result":{"content":` + string(contentj) + `,"structuredContent":` + string(scj) + `}}`)
}

// TestSnifferLargeResult: a 1 MB ask result, as a JSON body and as an SSE
// event, with its usage before or after the answer: the sniffer finds the
// response, its run id and usage, keeps no copy of the result, and
// allocates a small fraction of the message's size while it passes.
func TestSnifferLargeResult(t *testing.T) {
	u := tokens(3, 300, 30)
	for _, first := range []bool{true, false} {
		msg := askOfSize(1<<20, first, u)
		for _, sse := range []bool{false, true} {
			t.Run("usage-first="+strconv.FormatBool(first)+"/sse="+strconv.FormatBool(sse), func(t *testing.T) {
				body := msg
				ct := "application/json"
				if sse {
					ct = "text/event-stream"
					body = append(append([]byte("event: message\nid: 1\ndata: "), msg...), "\n\n"...)
				}
				var before, after runtime.MemStats
				rec := httptest.NewRecorder()
				rec.Body.Grow(len(body))
				sn := &sniffer{ResponseWriter: rec, wantID: json.RawMessage("7"), parse: true}
				sn.Header().Set("Content-Type", ct)
				limit := uint64(keepMessage + 64<<10)
				if !sse {
					// Its length known, a message too large to keep is
					// not copied at all.
					sn.Header().Set("Content-Length", strconv.Itoa(len(body)))
					limit = 64 << 10
				}
				runtime.ReadMemStats(&before)
				sn.WriteHeader(200)
				for b := body; len(b) > 0; b = b[min(32<<10, len(b)):] {
					sn.Write(b[:min(32<<10, len(b))])
				}
				o := &observation{}
				sn.finish(o, t.Context())
				runtime.ReadMemStats(&after)
				if o.kind != "" || !sn.found || sn.runID != "R-big" {
					t.Fatalf("kind %q found %v run %q, want a result of run R-big", o.kind, sn.found, sn.runID)
				}
				if sn.answer.raw != nil || sn.answer.size < 2<<20 {
					t.Fatalf("kept %d bytes of a result of %d", len(sn.answer.raw), sn.answer.size)
				}
				if sn.answer.usage.Usage == nil || *sn.answer.usage.Usage != u {
					t.Fatalf("usage %+v, want %+v", sn.answer.usage.Usage, u)
				}
				// At most the copy of a message small enough to keep, taken
				// before the message turned out larger.
				if alloc := after.TotalAlloc - before.TotalAlloc; alloc > limit {
					t.Fatalf("reading a %d-byte response allocated %d bytes (a kept message is at most %d)", len(body), alloc, keepMessage)
				}
			})
		}
	}
}

// TestRunKeepsUsageOfLargeAsk: through Runs, a 1 MB ask's usage counts in
// its run although its result is too large to keep.
func TestRunKeepsUsageOfLargeAsk(t *testing.T) {
	u := tokens(2, 20, 2)
	f := newFakeCalls()
	p := f.begin("oracle", "ask", "", 0, "", map[string]string{"task": "big"})
	s := scanIn(askOfSize(1<<20, false, u), 32<<10)
	p.o.runID = "R-big"
	f.deleg.finish(p.d, p.o)
	f.calls.finishAnswer(p.rec, p.o, &answer{raw: s.result(), size: s.resultSize(), usage: s.usage(), usageRead: true})
	run, ok := f.calls.Run("R-big")
	if !ok || run.Usage != u || !strings.Contains(run.Answer, "too large to keep") {
		t.Fatalf("run found %v, usage %+v, answer %q; want %+v and a note that the result was not kept", ok, run.Usage, Elide(run.Answer, 80), u)
	}
}

// FuzzScan: for any valid message, msgScan keeps what a whole decode
// finds, fed in pieces of any size.
//
//	go test -run '^$' -fuzz '^FuzzScan$' -fuzztime 30s ./internal/observe
func FuzzScan(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":7,"result":{"isError":true,"structuredContent":{"run_id":"R"}}}`), uint16(3))
	f.Add([]byte(`{"id":7,"error":{"code":1,"message":"m"}}`), uint16(1))
	f.Add(askOfSize(300, true, tokens(1, 2, 3)), uint16(17))
	f.Fuzz(func(t *testing.T, msg []byte, n uint16) {
		checkScan(t, msg, int(n)+1)
	})
}
