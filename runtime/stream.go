package runtime

// Model answers are asked for as a stream (stream: true, with
// stream_options.include_usage, which OpenAI, Azure, vLLM, llama.cpp's
// server, LM Studio and Ollama's OpenAI-compatible API accept), so that
// the person who asked sees the answer as it is written and a slow model
// shows signs of life. The chunks are assembled into the same
// openai.ChatCompletionResponse a non-streamed request returns
// (accumulator), so the turn, the retry loop and the usage records do not
// know the difference.
//
// What endpoints do differently, and what is done about it:
//
//   - An endpoint that refuses the stream (a 400, 404 or 422 whose message
//     speaks of "stream") gets the request again without it; one that
//     refuses only stream_options gets it again streamed without them.
//     Either is remembered for the agent, so later steps ask as it wants.
//   - An endpoint that answers the streamed request with one JSON
//     completion has given the answer: the transport hands it on as a
//     one-chunk stream, and the agent stops asking it for streams.
//   - Tool calls arrive in pieces keyed by index, the id and name in the
//     first; some servers omit the index or the id, and some Ollama and
//     vLLM builds send arguments as a JSON object in one chunk.
//   - The usage comes in a last chunk whose choices are empty (OpenAI), in
//     the chunk with the finish reason (llama.cpp), or in that chunk's
//     x_groq member (Groq). Azure's first chunk has no choices and no id.
//   - A stream that ends without a finish reason was cut: it is an
//     io.ErrUnexpectedEOF, retried as a closed connection is.
//   - An error object inside the stream (OpenRouter sends one with
//     finish_reason "error" when the upstream fails mid-answer) is the
//     error answer it is, its code the status.
//
// Options.ModelTimeout is, for a stream, the wait for its first byte and
// then for each next one: a long answer that keeps coming is never cut,
// and a stream that stalls is ended one ModelTimeout after its last byte.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/sashabaranov/go-openai"
)

// EnvModelStream names the variable that switches streamed model requests
// off ("0" or "false") for every agent whose Options do not.
const EnvModelStream = "SWITCHBOARD_MODEL_STREAM"

// stillWorkingEvery is how long a model request goes without a byte of its
// answer before the caller is told it is still being worked on.
const stillWorkingEvery = 10 * time.Second

// errNotAStream is the failure of a 200 answer to a streamed request that
// is neither an event stream nor a JSON completion: go-openai's own
// non-streamed path fails such a body too, and asking again gets the same.
var errNotAStream = errors.New("the endpoint answered 200 with neither an event stream nor a JSON completion")

// AnswerDelta is a piece of a turn's answer as the model writes it, for
// WithAnswerHandler. Only the answer's text is sent: never reasoning_content
// nor a <think> block, which are held back as they arrive, even when a tag
// is split across chunks. Its JSON form, {"step":2,"answer_delta":"..."},
// is how the agent server's ask tool sends it in a progress message: the
// answer_delta member, present in every one, tells it from the other
// messages.
type AnswerDelta struct {
	// Step is the model step the text belongs to.
	Step int `json:"step"`
	// Text is to be appended to what came before for the step.
	Text string `json:"answer_delta"`
	// Discard says that what was sent for Step is not the answer: the
	// request failed part way (and may be retried), the model went on to
	// call tools (the text was its preamble), or the text turned out to be
	// thinking (a </think> with no <think>, as templates that open the
	// block in the prompt write). Text is empty.
	Discard bool `json:"answer_discard,omitempty"`
}

type answerKey struct{}

// WithAnswerHandler returns a context whose turns send fn the answer's
// text as the model writes it. The text of a step that ends in tool calls
// is sent as it comes and then withdrawn (AnswerDelta.Discard): whether
// a step answers is known only at its end. The Result's Answer is what
// counts; the deltas are a preview of it, and equal it, apart from the
// whitespace at its ends, when no Discard came after them. Calls to fn are serialized within a turn.
func WithAnswerHandler(ctx context.Context, fn func(AnswerDelta)) context.Context {
	return context.WithValue(ctx, answerKey{}, fn)
}

func answerHandler(ctx context.Context) func(AnswerDelta) {
	fn, _ := ctx.Value(answerKey{}).(func(AnswerDelta))
	return fn
}

// streamMemo is what an agent has learned of its endpoint's streams. The
// fields only ever go from false to true.
type streamMemo struct {
	off        atomic.Bool // the endpoint refused streams, or answered one with JSON
	noOptions  atomic.Bool // the endpoint refused stream_options
	openThinks atomic.Bool // the model's content began with thinking closed by a bare </think>
	// stillEvery replaces stillWorkingEvery when set: for tests.
	stillEvery time.Duration
}

// streaming reports whether the agent asks for streams.
func (a *Agent) streaming() (bool, error) {
	if a.opts.NoStream || a.stream.off.Load() {
		return false, nil
	}
	v := a.opts.Getenv(EnvModelStream)
	if v == "" {
		return true, nil
	}
	on, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("$%s=%q: want 1 or 0", EnvModelStream, v)
	}
	return on, nil
}

// liveness is what one model request's response has shown of itself. The
// transport finds it in the request's context (a streamed request's only)
// and wraps the event stream's body so that each read is seen.
type liveness struct {
	began time.Time
	last  atomic.Int64 // unix nanoseconds of the last byte read; 0 before the first
	// onRead is called after each read that returned bytes, on the
	// goroutine reading the body.
	onRead func()
	// plainJSON: the endpoint answered the stream with one JSON completion,
	// handed on as a one-chunk stream. notStream: with a 200 body that is
	// neither. Both are written by RoundTrip before it returns.
	plainJSON, notStream bool
}

type livenessKey struct{}

func livenessOf(ctx context.Context) *liveness {
	l, _ := ctx.Value(livenessKey{}).(*liveness)
	return l
}

// body wraps an event stream's body so that each read is seen.
func (l *liveness) body(rc io.ReadCloser) io.ReadCloser {
	return readCloser{Reader: seenReader{rc, l}, Closer: rc}
}

type seenReader struct {
	r io.Reader
	l *liveness
}

func (s seenReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if n > 0 {
		s.l.last.Store(time.Now().UnixNano())
		if s.l.onRead != nil {
			s.l.onRead()
		}
	}
	return n, err
}

// asStream turns a JSON completion, the answer to a streamed request, into
// the one-chunk event stream go-openai's reader expects; ok is false when
// body is not JSON.
func asStream(body []byte) ([]byte, bool) {
	var b bytes.Buffer
	b.WriteString("data: ")
	if json.Compact(&b, bytes.TrimSpace(body)) != nil {
		return body, false
	}
	b.WriteString("\n\ndata: [DONE]\n\n")
	return b.Bytes(), true
}

// stillWorking tells note, every interval of a request's life without a
// byte of its answer, that the model is still at it. stop ends it and
// waits for its goroutine.
func (a *Agent) stillWorking(ctx context.Context, l *liveness, step int) (stop func()) {
	note := noteHandler(ctx)
	if note == nil {
		return func() {}
	}
	every := a.stream.stillEvery
	if every <= 0 {
		every = stillWorkingEvery
	}
	name, where := a.Model()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case now := <-t.C:
				last := l.last.Load()
				switch {
				case last == 0:
					note(fmt.Sprintf("model %s at %s is still working on step %d (%s)", name, where, step, seconds(now.Sub(l.began).Truncate(time.Second))))
				case now.Sub(time.Unix(0, last)) >= every:
					note(fmt.Sprintf("model %s at %s has sent nothing more for %s on step %d", name, where, seconds(now.Sub(time.Unix(0, last)).Truncate(time.Second)), step))
				}
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

// streamRefusal says whether a failed streamed request was refused for
// asking for a stream: a 400, 404 or 422 whose message, in the provider's
// words, is about it. options is true when it names only stream_options.
func streamRefusal(err error) (refused, options bool) {
	switch httpStatus(err) {
	case http.StatusBadRequest, http.StatusNotFound, http.StatusUnprocessableEntity:
	default:
		return false, false
	}
	msg := strings.ToLower(apiMessage(err))
	if !aboutStreams.MatchString(msg) {
		return false, false
	}
	return true, strings.Contains(msg, "stream_options") || strings.Contains(msg, "include_usage")
}

// aboutStreams finds the word in a provider's message: "stream",
// "streaming", "stream_options", but not "upstream".
var aboutStreams = regexp.MustCompile(`\bstream`)

// chatStream runs one chat completion as a stream, falling back as the
// endpoint asks (see the top of the file).
func (a *Agent) chatStream(ctx context.Context, req openai.ChatCompletionRequest, step int) (openai.ChatCompletionResponse, bool, error) {
	sreq := req
	sreq.Stream = true
	if !a.stream.noOptions.Load() {
		sreq.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	}
	for {
		resp, err := a.streamOnce(ctx, sreq, step)
		if err == nil || ctx.Err() != nil {
			return resp, true, err
		}
		refused, options := streamRefusal(err)
		switch {
		case !refused:
			return resp, true, err
		case options && sreq.StreamOptions != nil:
			a.stream.noOptions.Store(true)
			sreq.StreamOptions = nil
			a.log.Info("the model endpoint refuses stream_options; asking without", "model", a.model.name, "step", step, "err", err)
		default:
			a.log.Info("the model endpoint refuses streams; asking without", "model", a.model.name, "step", step, "err", err)
			resp, err := a.chatWhole(ctx, req, step)
			if err == nil {
				a.stream.off.Store(true) // the refusal was the stream's: later steps ask as it wants
			}
			return resp, false, err
		}
	}
}

// streamOnce sends one streamed request and assembles its answer.
func (a *Agent) streamOnce(ctx context.Context, req openai.ChatCompletionRequest, step int) (openai.ChatCompletionResponse, error) {
	timeout := a.opts.ModelTimeout
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	idle := time.AfterFunc(timeout, func() { cancel(ErrModelTimeout) })
	defer idle.Stop()
	l := &liveness{began: time.Now(), onRead: func() { idle.Reset(timeout) }}
	stop := a.stillWorking(ctx, l, step)
	defer stop()
	acc := newAccumulator(answerHandler(ctx), step, &a.stream)
	resp, err := a.readStream(context.WithValue(rctx, livenessKey{}, l), req, acc)
	if l.plainJSON {
		a.stream.off.Store(true) // it answers JSON: later steps need not ask for more
	}
	if err != nil {
		acc.discard()
		if ctx.Err() == nil && errors.Is(context.Cause(rctx), ErrModelTimeout) {
			if l.last.Load() == 0 {
				err = fmt.Errorf("%w: no answer within %v (set $%s or --model-timeout): %w", ErrModelTimeout, timeout, EnvModelTimeout, err)
			} else {
				err = fmt.Errorf("%w: the answer stopped coming: nothing for %v after %d %s (set $%s or --model-timeout): %w", ErrModelTimeout, timeout, acc.chunks, plural(acc.chunks, "chunk", "chunks"), EnvModelTimeout, err)
			}
		}
		return resp, err
	}
	return resp, nil
}

func (a *Agent) readStream(ctx context.Context, req openai.ChatCompletionRequest, acc *accumulator) (openai.ChatCompletionResponse, error) {
	stream, err := a.model.client.CreateChatCompletionStream(ctx, req)
	if err != nil {
		return openai.ChatCompletionResponse{}, err
	}
	defer stream.Close()
	for {
		raw, err := stream.RecvRaw()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return openai.ChatCompletionResponse{}, err
		}
		if err := acc.add(raw); err != nil {
			if at, _ := ctx.Value(attemptKey{}).(*attempt); at != nil && httpStatus(err) != 0 {
				at.errorIn200 = true
			}
			return openai.ChatCompletionResponse{}, err
		}
	}
	if acc.finish == "" {
		if l := livenessOf(ctx); l != nil && l.notStream {
			return openai.ChatCompletionResponse{}, errNotAStream
		}
		// go-openai reports a stream that ended with [DONE] and one that
		// was cut alike (io.EOF); without a finish reason it was cut.
		return openai.ChatCompletionResponse{}, fmt.Errorf("the stream ended after %d %s without a finish reason: %w", acc.chunks, plural(acc.chunks, "chunk", "chunks"), io.ErrUnexpectedEOF)
	}
	return acc.response(), nil
}

// The wire shape of a chunk, read with the arguments left raw (a string
// as OpenAI sends them, or an object). A JSON completion handed on as one
// chunk has message where a chunk has delta; both are read alike.
type wireChunk struct {
	ID                string          `json:"id"`
	Model             string          `json:"model"`
	Created           int64           `json:"created"`
	SystemFingerprint string          `json:"system_fingerprint"`
	Choices           []wireChoice    `json:"choices"`
	Usage             *wireUsage      `json:"usage"`
	Error             json.RawMessage `json:"error"`
	// XGroq is where Groq puts a stream's usage, in its last chunk.
	XGroq *struct {
		Usage *wireUsage `json:"usage"`
	} `json:"x_groq"`
}

type wireChoice struct {
	Index        int          `json:"index"`
	Delta        *wireMessage `json:"delta"`
	Message      *wireMessage `json:"message"`
	FinishReason *string      `json:"finish_reason"`
}

type wireMessage struct {
	Role             string     `json:"role"`
	Content          *string    `json:"content"`
	ReasoningContent *string    `json:"reasoning_content"`
	Refusal          *string    `json:"refusal"`
	ToolCalls        []wireCall `json:"tool_calls"`
}

type wireCall struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// accumulator assembles a stream's chunks into one completion, and feeds
// the answer's text to the caller as it comes.
type accumulator struct {
	id, model   string
	created     int64
	fingerprint string
	role        string
	content     strings.Builder
	reasoning   strings.Builder
	refusal     strings.Builder
	calls       []*callParts
	finish      openai.FinishReason
	usage       openai.Usage
	chunks      int
	feed        answerFeed
}

type callParts struct {
	index    int
	id, typ  string
	name     string
	args     strings.Builder
	nullArgs bool
}

func newAccumulator(emit func(AnswerDelta), step int, memo *streamMemo) *accumulator {
	return &accumulator{feed: answerFeed{emit: emit, step: step, memo: memo, hold: memo.openThinks.Load()}}
}

// add reads one chunk.
func (acc *accumulator) add(raw []byte) error {
	var c wireChunk
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("chunk %d of the stream is not JSON: %w", acc.chunks+1, err)
	}
	acc.chunks++
	if len(c.Error) > 0 && string(c.Error) != "null" {
		return streamError(c.Error)
	}
	if acc.id == "" {
		acc.id, acc.model, acc.created, acc.fingerprint = c.ID, c.Model, c.Created, c.SystemFingerprint
	}
	switch {
	case c.Usage != nil:
		acc.usage = c.Usage.normalized() // vLLM's continuous usage is cumulative: the last one counts
	case c.XGroq != nil && c.XGroq.Usage != nil:
		acc.usage = c.XGroq.Usage.normalized()
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue // a turn asks for one choice
		}
		m := ch.Delta
		if m == nil {
			m = ch.Message
		}
		if m != nil {
			acc.addMessage(m, ch.Message != nil)
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			acc.finish = openai.FinishReason(*ch.FinishReason)
		}
	}
	if acc.finish != "" && len(acc.calls) == 0 {
		acc.feed.end()
	}
	return nil
}

func (acc *accumulator) addMessage(m *wireMessage, whole bool) {
	if m.Role != "" {
		acc.role = m.Role
	}
	if m.ReasoningContent != nil {
		acc.reasoning.WriteString(*m.ReasoningContent)
	}
	if m.Refusal != nil {
		acc.refusal.WriteString(*m.Refusal)
	}
	for i, tc := range m.ToolCalls {
		acc.addCall(tc, whole, i)
	}
	if len(m.ToolCalls) > 0 {
		acc.feed.discard() // the step calls tools: its text was no answer
		acc.feed.stopped = true
	}
	if m.Content != nil && *m.Content != "" {
		acc.content.WriteString(*m.Content)
		acc.feed.text(*m.Content)
	}
}

// addCall adds a piece of a tool call: by its index, or, from a server
// that sends none, to the call its id names (the last one when it names
// none). A whole message's calls are each whole, in order.
func (acc *accumulator) addCall(tc wireCall, whole bool, pos int) {
	var p *callParts
	switch {
	case whole:
		p = acc.call(pos)
	case tc.Index != nil:
		p = acc.call(*tc.Index)
	case len(acc.calls) > 0 && (tc.ID == "" || tc.ID == acc.calls[len(acc.calls)-1].id):
		p = acc.calls[len(acc.calls)-1]
	default:
		p = acc.call(len(acc.calls))
	}
	if p.id == "" {
		p.id = tc.ID
	}
	if p.typ == "" {
		p.typ = tc.Type
	}
	if n := tc.Function.Name; n != "" && n != p.name {
		p.name += n // a name split over chunks; a server that repeats it whole in each is not doubled
	}
	a := bytes.TrimSpace(tc.Function.Arguments)
	switch {
	case len(a) == 0:
	case string(a) == "null":
		p.nullArgs = true
	case a[0] == '"':
		var s string
		if json.Unmarshal(a, &s) == nil {
			p.args.WriteString(s)
		}
	default:
		// An object in one chunk (some Ollama and vLLM builds): its
		// compact text, as the transport makes of a whole response's.
		var compact bytes.Buffer
		if json.Compact(&compact, a) == nil {
			p.args.Reset()
			p.args.Write(compact.Bytes())
		}
	}
}

// call returns the parts of the call at index, made when new.
func (acc *accumulator) call(index int) *callParts {
	for _, p := range acc.calls {
		if p.index == index {
			return p
		}
	}
	p := &callParts{index: index}
	acc.calls = append(acc.calls, p)
	return p
}

func (acc *accumulator) discard() { acc.feed.discard() }

// response is the completion the chunks make, as the non-streamed request
// would have returned it.
func (acc *accumulator) response() openai.ChatCompletionResponse {
	msg := openai.ChatCompletionMessage{
		Role:             acc.role,
		Content:          acc.content.String(),
		Refusal:          acc.refusal.String(),
		ReasoningContent: acc.reasoning.String(),
	}
	if msg.Role == "" {
		msg.Role = openai.ChatMessageRoleAssistant
	}
	for _, p := range acc.calls {
		args := p.args.String()
		if args == "" && p.nullArgs {
			args = "{}"
		}
		msg.ToolCalls = append(msg.ToolCalls, openai.ToolCall{
			ID: p.id, Type: openai.ToolType(p.typ),
			Function: openai.FunctionCall{Name: p.name, Arguments: args},
		})
	}
	return openai.ChatCompletionResponse{
		ID: acc.id, Object: "chat.completion", Created: acc.created, Model: acc.model,
		SystemFingerprint: acc.fingerprint, Usage: acc.usage,
		Choices: []openai.ChatCompletionChoice{{Message: msg, FinishReason: acc.finish}},
	}
}

// streamError is the error answer an error object inside a stream is: an
// *openai.APIError whose status is the object's code when that is an HTTP
// status (OpenRouter's 429, 502), else 502 Bad Gateway (the endpoint passed
// on a failure).
func streamError(raw json.RawMessage) error {
	var e struct {
		Code    json.RawMessage `json:"code"`
		Message string          `json:"message"`
		Type    string          `json:"type"`
	}
	if json.Unmarshal(raw, &e) != nil {
		var s string
		_ = json.Unmarshal(raw, &s) // Ollama writes the error as a string
		e.Message = s
	}
	status := http.StatusBadGateway
	var code any
	if n, err := strconv.Atoi(strings.Trim(string(e.Code), `"`)); err == nil {
		code = n
		if n >= 400 && n <= 599 {
			status = n
		}
	} else if len(e.Code) > 0 {
		_ = json.Unmarshal(e.Code, &code)
	}
	return fmt.Errorf("an error inside the stream: %w", &openai.APIError{
		Code: code, Message: e.Message, Type: e.Type,
		HTTPStatusCode: status, HTTPStatus: strconv.Itoa(status) + " " + http.StatusText(status),
	})
}

// answerFeed sends a step's answer text to the caller as it comes, with
// what splitThink would take out of it held back: <think> blocks (a tag
// may be split across chunks), the whitespace at either end. Before the
// first tag, a </think> with no <think> makes what came before it thought:
// it is withdrawn, and the agent holds back the text of later steps until
// their </think>, since its model's template opens the block in the
// prompt.
type answerFeed struct {
	emit    func(AnswerDelta)
	step    int
	memo    *streamMemo
	hold    bool            // hold everything until a </think>
	held    strings.Builder // what hold kept back
	inThink bool
	tagSeen bool   // a tag was read: a later bare </think> is text, as splitThink reads it
	pending string // the end of the text read, which may begin a tag
	space   string // whitespace not yet sent: sent only when text follows it
	started bool   // text has been sent since the start (or a discard)
	sent    bool   // something was sent and not withdrawn
	stopped bool   // the step calls tools: nothing more is sent
}

func (f *answerFeed) text(s string) {
	if f.emit == nil || f.stopped {
		return
	}
	if f.hold {
		f.held.WriteString(s)
		h := f.held.String()
		i := strings.Index(h, thinkClose)
		if i < 0 {
			return
		}
		f.hold, f.tagSeen = false, true
		f.held.Reset()
		s = h[i+len(thinkClose):]
	}
	b := f.pending + s
	f.pending = ""
	for b != "" {
		if f.inThink {
			i := strings.Index(b, thinkClose)
			if i < 0 {
				f.pending = b[len(b)-partialTag(b, thinkClose):]
				return
			}
			f.inThink = false
			b = b[i+len(thinkClose):]
			continue
		}
		open, close := strings.Index(b, thinkOpen), strings.Index(b, thinkClose)
		if !f.tagSeen && close >= 0 && (open < 0 || close < open) {
			// What came before was thought (splitThink's bare close).
			f.tagSeen = true
			f.memo.openThinks.Store(true)
			f.discard()
			b = b[close+len(thinkClose):]
			continue
		}
		if open >= 0 {
			f.tagSeen, f.inThink = true, true
			f.send(b[:open])
			b = b[open+len(thinkOpen):]
			continue
		}
		keep := max(partialTag(b, thinkOpen), partialTag(b, thinkClose))
		f.send(b[:len(b)-keep])
		f.pending = b[len(b)-keep:]
		return
	}
}

// end sends what was kept back in case it began a tag, or held back for a
// </think> that never came.
func (f *answerFeed) end() {
	if f.emit == nil || f.stopped {
		return
	}
	if f.hold {
		f.hold = false
		h := f.held.String()
		f.held.Reset()
		f.text(h)
	}
	if !f.inThink {
		f.send(f.pending)
	}
	f.pending = ""
	f.stopped = true
}

// send sends s with the whitespace at the answer's ends held back.
func (f *answerFeed) send(s string) {
	if !f.started {
		s = strings.TrimLeftFunc(s, unicode.IsSpace)
		if s == "" {
			return
		}
	}
	s = f.space + s
	body := strings.TrimRightFunc(s, unicode.IsSpace)
	f.space = s[len(body):]
	if body == "" {
		return
	}
	f.started, f.sent = true, true
	f.emit(AnswerDelta{Step: f.step, Text: body})
}

// discard withdraws what was sent for the step.
func (f *answerFeed) discard() {
	if f.emit != nil && f.sent {
		f.emit(AnswerDelta{Step: f.step, Discard: true})
	}
	f.sent, f.started, f.space = false, false, ""
}

// partialTag is the length of the longest end of s that begins tag.
func partialTag(s, tag string) int {
	for n := min(len(s), len(tag)-1); n > 0; n-- {
		if strings.HasSuffix(s, tag[:n]) {
			return n
		}
	}
	return 0
}
