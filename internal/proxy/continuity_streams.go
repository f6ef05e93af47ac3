package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/switchboard-run/switchboard/pool"
)

// Resuming a stream across a restart. An agent with an event store
// (internal/agentserver/resume.go) opens every POST stream with a priming
// event whose id names the stream ("<stream>_<index>", go-sdk's format; the
// standalone GET stream is ""). A client whose stream broke reconnects with
// GET and Last-Event-ID. If the agent restarted meanwhile, the events died
// with it and the new process answers 404 for the old session. Then:
//
//   - the standalone stream's resumption is sent again as a fresh GET on the
//     re-established session: it may have missed notifications, which the
//     spec allows for that stream;
//   - a call's stream cannot be resumed, and a fresh GET would leave the
//     client waiting for a response that will never come. Continuity noted
//     which request each stream answers (from its priming event) and
//     answers the resumption with an SSE stream holding that request's
//     JSON-RPC error: the call ended with the agent, outcome unknown. The
//     session stays;
//   - a stream it does not know is answered 400: it can do no better.

// maxKeptStreams bounds the call streams remembered per session; the
// oldest is forgotten first (a stream matters only while its call runs).
const maxKeptStreams = 64

// maxPrimeBytes is how much of a response's start is looked at for the
// priming event.
const maxPrimeBytes = 512

// codeOutcomeUnknown is the JSON-RPC error a resumed stream gets when its
// call died with the agent: pool.CodeOutcomeUnknown (-32060), a code of its
// own so that a client can tell "the request may have run, its answer is
// gone" from an error the agent answered (our pool reports it as
// outcome_unknown). Not -32000, which is the agent's own and the TypeScript
// SDK's, and none of the codes go-sdk gives a meaning (-32003 "client is
// closing" would end the client's connection); pool.CodeOutcomeUnknown
// lists them.
const codeOutcomeUnknown = pool.CodeOutcomeUnknown

// streamOf returns the stream id of a Last-Event-ID in go-sdk's format.
func streamOf(eventID string) (string, bool) {
	i := strings.LastIndexByte(eventID, '_')
	if i < 0 {
		return "", false
	}
	return eventID[:i], true
}

// keptStream is one call's stream: the request it answers and the
// upstream session it was opened on.
type keptStream struct {
	id       json.RawMessage
	upstream string
}

// resumption is what to do with a GET.
type resumption int

const (
	resumeForward resumption = iota // send it on as it is
	resumeFresh                     // the standalone stream of an older upstream session: open it afresh
	resumeLost                      // a call's stream of an older upstream session: lostStream
)

// resumptionLocked decides about a GET with Last-Event-ID lei ("": none).
// A resumption of a stream opened on an older upstream session must not
// reach the new one, whose event store has never heard of it: go-sdk
// would answer 400, which its clients take as the end of the session.
func (ks *keptSession) resumptionLocked(lei string) resumption {
	if lei == "" {
		ks.standalone = ks.upstream
		return resumeForward
	}
	stream, ok := streamOf(lei)
	switch {
	case !ok:
		return resumeForward
	case stream == "" && ks.standalone != ks.upstream:
		ks.standalone = ks.upstream
		return resumeFresh
	case stream == "":
		return resumeForward
	}
	if st, known := ks.streams[stream]; known && st.upstream != ks.upstream {
		return resumeLost
	}
	return resumeForward
}

// noteStreamLocked remembers that stream, opened on upstream session up,
// answers the request with id.
func (ks *keptSession) noteStreamLocked(stream string, id json.RawMessage, up string) {
	if ks.streams == nil {
		ks.streams = make(map[string]keptStream)
	}
	if _, ok := ks.streams[stream]; !ok {
		ks.streamOrder = append(ks.streamOrder, stream)
	}
	ks.streams[stream] = keptStream{id: id, upstream: up}
	for len(ks.streamOrder) > maxKeptStreams {
		delete(ks.streams, ks.streamOrder[0])
		ks.streamOrder = ks.streamOrder[1:]
	}
}

// watchPrime wraps an SSE response's body so that its priming event, when
// it has one, tells which stream answers request id on upstream session up.
func (c *Continuity) watchPrime(resp *http.Response, ks *keptSession, id json.RawMessage, up string) {
	if id == nil || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return
	}
	resp.Body = &primeWatcher{ReadCloser: resp.Body, found: func(stream string) {
		c.mu.Lock()
		ks.noteStreamLocked(stream, id, up)
		c.mu.Unlock()
	}}
}

// primeWatcher passes a body through and looks at its first bytes for
// "id: <stream>_<n>" in the first event.
type primeWatcher struct {
	io.ReadCloser
	head  []byte
	done  bool
	found func(stream string)
}

func (p *primeWatcher) Read(b []byte) (int, error) {
	n, err := p.ReadCloser.Read(b)
	if !p.done && n > 0 {
		p.head = append(p.head, b[:min(n, maxPrimeBytes-len(p.head))]...)
		if end := bytes.Index(p.head, []byte("\n\n")); end >= 0 || len(p.head) >= maxPrimeBytes {
			p.done = true
			if end < 0 {
				end = len(p.head)
			}
			for _, line := range strings.Split(string(p.head[:end]), "\n") {
				if v, ok := strings.CutPrefix(line, "id:"); ok {
					if stream, ok := streamOf(strings.TrimSpace(v)); ok && stream != "" {
						p.found(stream)
					}
				}
			}
			p.head = nil
		}
	}
	return n, err
}

// lostStream answers the resumption of a stream that died with the agent's
// previous process; ok is false for the standalone stream, which is sent
// again as a fresh GET.
func (c *Continuity) lostStream(req *http.Request, ks *keptSession, lastEventID string) (resp *http.Response, ok bool) {
	stream, valid := streamOf(lastEventID)
	if valid && stream == "" {
		return nil, false
	}
	c.mu.Lock()
	id := ks.streams[stream].id
	c.mu.Unlock()
	if id == nil {
		return synthesized(req, http.StatusBadRequest, nil, continuityError(nil,
			fmt.Sprintf("stream %q cannot be resumed: the agent restarted and its events are gone", lastEventID))), true
	}
	body, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": id,
		"error": map[string]any{"code": codeOutcomeUnknown, "message": "the agent restarted while this request ran; its stream cannot be resumed and its outcome is unknown"},
	})
	sse := append(append([]byte("event: message\ndata: "), body...), '\n', '\n')
	h := http.Header{"Content-Type": {"text/event-stream"}, "Cache-Control": {"no-cache"}}
	return synthesized(req, http.StatusOK, h, sse), true
}
