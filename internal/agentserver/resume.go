package agentserver

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Resumable SSE (spec 2025-11-25, transports, "Resumability and
// Redelivery"; SEP-1699). With an event store, go-sdk opens every POST
// stream of a session-era client with a priming event that carries an
// event id and stores what it sends, so a client whose stream drops can
// reconnect with Last-Event-ID and get the rest. The spec also asks the
// priming event for a retry field, telling the client when to reconnect;
// go-sdk v1.8.0 writes none, so retryField adds it.
//
// It is on by default; Options.NoResumableStreams turns it off, and
// `agent serve` reads SWITCHBOARD_RESUMABLE_STREAMS=0 for that (the studio
// passes its own environment on to its agents). A go-sdk client whose
// call's stream the agent's death cut resumes the stream through the studio
// and gets, in a 200 stream, the studio's JSON-RPC error
// pool.CodeOutcomeUnknown for that call (internal/studio/
// continuity_streams.go), which our pool reports as outcome_unknown, as it
// does the studio's 502 without resumable streams.
//
// What is stored is bounded (maxEventBytes for the whole process, oldest
// streams purged first) and in memory: an agent's restart loses it, and a
// stream cut by the agent's death cannot be resumed (the studio answers
// such a resumption with an error, internal/proxy/continuity.go).

// maxEventBytes bounds the events the agent keeps for resumption.
const maxEventBytes = 4 << 20

// sseRetry is the reconnection delay the priming event asks for: an agent
// the studio restarts is back within about a second.
const sseRetry = 500 * time.Millisecond

// EnvResumableStreams, set to 0, makes `agent serve` keep no events for
// resumption (Options.NoResumableStreams); unset or 1 keeps them.
const EnvResumableStreams = "SWITCHBOARD_RESUMABLE_STREAMS"

// errResumableValue is the error for a value of EnvResumableStreams that is
// neither 0 nor 1.
var errResumableValue = errors.New("want 0 (off) or 1 (on, the default)")

// NoResumableFromEnv reports whether the environment turns resumable
// streams off.
func NoResumableFromEnv() (bool, error) {
	switch v := os.Getenv(EnvResumableStreams); v {
	case "", "1":
		return false, nil
	case "0":
		return true, nil
	default:
		return false, fmt.Errorf("%s=%q: %w", EnvResumableStreams, v, errResumableValue)
	}
}

// eventStore is the store for StreamableHTTPOptions: nil (no resumption)
// unless on.
func eventStore(on bool) mcp.EventStore {
	if !on {
		return nil
	}
	s := mcp.NewMemoryEventStore(nil)
	s.SetMaxBytes(maxEventBytes)
	return s
}

// primePrefix is how go-sdk's priming event begins; its id line follows.
var primePrefix = []byte("event: prime\nid: ")

// retryField puts a "retry" field into the priming event of every SSE
// response of next.
func retryField(next http.Handler, retry time.Duration) http.Handler {
	field := []byte("retry: " + strconv.FormatInt(retry.Milliseconds(), 10) + "\n")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&primeWriter{ResponseWriter: w, field: field}, r)
	})
}

// primeWriter rewrites the first write of an SSE response when it is the
// priming event (go-sdk writes each event in one Write).
type primeWriter struct {
	http.ResponseWriter
	field []byte
	done  bool // the first write has been seen
}

func (p *primeWriter) Write(b []byte) (int, error) {
	if p.done {
		return p.ResponseWriter.Write(b)
	}
	p.done = true
	if !bytes.HasPrefix(b, primePrefix) {
		return p.ResponseWriter.Write(b)
	}
	eol := bytes.IndexByte(b[len(primePrefix):], '\n')
	if eol < 0 {
		return p.ResponseWriter.Write(b)
	}
	cut := len(primePrefix) + eol + 1
	out := make([]byte, 0, len(b)+len(p.field))
	out = append(append(append(out, b[:cut]...), p.field...), b[cut:]...)
	if _, err := p.ResponseWriter.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}

// Unwrap lets http.ResponseController reach the connection (flushes,
// deadlines).
func (p *primeWriter) Unwrap() http.ResponseWriter { return p.ResponseWriter }

// Flush passes through, for callers that assert http.Flusher.
func (p *primeWriter) Flush() {
	if f, ok := p.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
