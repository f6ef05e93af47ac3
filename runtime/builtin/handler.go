package builtin

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// This file is the HTTP face of the model: the two endpoints of the OpenAI
// API a chat client uses, request validation with OpenAI's error shape, and
// the response in both its plain and its streamed (server-sent events) form.
// Validation follows the real API where a turn loop is most likely to get
// things wrong (a tool message answering no call, a call left unanswered),
// so that a bug shows up here, offline, rather than against a paid API.

// maxBody bounds a request body; a conversation larger than this is a bug.
const maxBody = 16 << 20

// fingerprint names this planner's behaviour; change it when answers change.
const fingerprint = "fp_builtin_grammar_3"

// Handler returns the builtin model's HTTP handler. It serves
//
//	POST /v1/chat/completions   (also with "stream": true)
//	GET  /v1/models
//	GET  /v1/models/builtin
//
// and the same paths without the /v1 prefix. It keeps no state: any number
// of goroutines may use it, and every answer depends on the request alone.
func Handler() http.Handler { return handler{} }

type handler struct{}

func (handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		// A planner bug must fail one request, not the process that embeds
		// the model (the in-process transport has no net/http server to
		// recover for it).
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			writeError(w, http.StatusInternalServerError, "server_error", "", fmt.Sprintf("builtin model internal error: %v", p))
		}
	}()
	path := strings.TrimSuffix(r.URL.Path, "/")
	path = strings.TrimPrefix(path, "/v1")
	switch path {
	case "/chat/completions":
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			writeError(w, http.StatusMethodNotAllowed, "invalid_request_error", "", fmt.Sprintf("method %s not allowed on %s; use POST", r.Method, r.URL.Path))
			return
		}
		chatCompletions(w, r)
	case "/models", "/models/" + ModelName:
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", http.MethodGet)
			writeError(w, http.StatusMethodNotAllowed, "invalid_request_error", "", fmt.Sprintf("method %s not allowed on %s; use GET", r.Method, r.URL.Path))
			return
		}
		m := modelEntry{ID: ModelName, Object: "model", Created: 0, OwnedBy: "switchboard"}
		if path == "/models" {
			writeJSON(w, http.StatusOK, modelList{Object: "list", Data: []modelEntry{m}})
		} else {
			writeJSON(w, http.StatusOK, m)
		}
	default:
		if strings.HasPrefix(path, "/models/") {
			writeErrorCode(w, http.StatusNotFound, "invalid_request_error", "model", "model_not_found",
				fmt.Sprintf("The model %q does not exist; this endpoint serves only %q.", strings.TrimPrefix(path, "/models/"), ModelName))
			return
		}
		writeError(w, http.StatusNotFound, "invalid_request_error", "", fmt.Sprintf("Unknown request URL: %s %s. The builtin model serves POST /v1/chat/completions and GET /v1/models.", r.Method, r.URL.Path))
	}
}

func chatCompletions(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, "invalid_request_error", "", fmt.Sprintf("request body exceeds %d bytes", maxBody))
			return
		}
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "could not read the request body: "+err.Error())
		return
	}
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "We could not parse the JSON body of your request: "+err.Error())
		return
	}
	tools, choice, param, err := validate(&req)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", param, err.Error())
		return
	}

	rep := respond(&req, tools, choice)
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	resp := chatResponse{
		ID:                "chatcmpl-builtin-" + hash[:24],
		Object:            "chat.completion",
		Created:           0,         // fixed: equal requests get byte-identical responses
		Model:             ModelName, // whatever was asked for, this is who answers
		SystemFingerprint: fingerprint,
	}
	msg := &outMessage{Role: "assistant"}
	finish := "stop"
	completion := 0
	if len(rep.calls) > 0 {
		finish = "tool_calls"
		n := priorCalls(req.Messages)
		for i, c := range rep.calls {
			tc := toolCall{ID: fmt.Sprintf("call_%d_%s", n+i+1, hash[:12]), Type: "function"}
			tc.Function.Name, tc.Function.Arguments = c.name, c.args
			msg.ToolCalls = append(msg.ToolCalls, tc)
			completion += 1 + len(strings.Fields(c.args))
		}
	} else {
		text := rep.text
		msg.Content = &text
		msg.Refusal = rep.refusal
		completion = len(strings.Fields(text))
	}
	prompt := len(strings.Fields(string(body)))
	u := &usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion}

	if req.Stream {
		stream(w, resp, msg, finish, u, req.StreamOptions != nil && req.StreamOptions.IncludeUsage)
		return
	}
	resp.Choices = []chatChoice{{Index: 0, Message: msg, FinishReason: &finish}}
	resp.Usage = u
	writeJSON(w, http.StatusOK, resp)
}

// validate checks what the real API checks and this model relies on, and
// returns the digested tools and tool_choice. param names the offending
// request field for the error body.
func validate(req *chatRequest) (tools []*tool, choice toolChoice, param string, err error) {
	if req.N > 1 {
		return nil, choice, "n", fmt.Errorf("n=%d: the builtin model returns exactly one choice", req.N)
	}
	if len(req.Messages) == 0 {
		return nil, choice, "messages", errors.New("messages: must be a non-empty array")
	}
	open := map[string]bool{} // tool_call ids awaiting their tool message
	var waiting []string      // the same, in order, for the error message
	for i, m := range req.Messages {
		switch m.Role {
		case "system", "developer", "user", "assistant", "tool", "function":
		default:
			return nil, choice, fmt.Sprintf("messages[%d].role", i), fmt.Errorf("messages[%d].role %q is not one of system, developer, user, assistant, tool", i, m.Role)
		}
		if m.Role != "tool" && len(waiting) > 0 {
			//lint:ignore ST1005 the OpenAI API's own message, word for word, so that a client sees what it would see there
			return nil, choice, "messages", fmt.Errorf("An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: %s", strings.Join(waiting, ", "))
		}
		switch m.Role {
		case "assistant":
			for k, tc := range m.ToolCalls {
				if tc.ID == "" || tc.Function.Name == "" {
					return nil, choice, fmt.Sprintf("messages[%d].tool_calls[%d]", i, k), fmt.Errorf("messages[%d].tool_calls[%d] needs an id and a function name", i, k)
				}
				open[tc.ID] = true
				waiting = append(waiting, tc.ID)
			}
		case "tool":
			if !open[m.ToolCallID] {
				//lint:ignore ST1005 the OpenAI API's own message, word for word, so that a client sees what it would see there
				return nil, choice, fmt.Sprintf("messages[%d].tool_call_id", i), fmt.Errorf("Invalid parameter: messages[%d] with role 'tool' (tool_call_id %q) must be a response to a preceding message with 'tool_calls'", i, m.ToolCallID)
			}
			delete(open, m.ToolCallID)
			for k, id := range waiting {
				if id == m.ToolCallID {
					waiting = append(waiting[:k], waiting[k+1:]...)
					break
				}
			}
		}
	}
	if len(waiting) > 0 {
		//lint:ignore ST1005 the OpenAI API's own message, word for word, so that a client sees what it would see there
		return nil, choice, "messages", fmt.Errorf("An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: %s", strings.Join(waiting, ", "))
	}
	if lastUser(req.Messages) < 0 {
		return nil, choice, "messages", errors.New("messages: the builtin model needs a user message: the latest one is the task it plans")
	}
	if tools, err = parseTools(req.Tools); err != nil {
		return nil, choice, "tools", err
	}
	if choice, err = parseToolChoice(req.ToolChoice); err != nil {
		return nil, choice, "tool_choice", err
	}
	if choice.mode == "function" && toolNamed(tools, choice.name) == nil {
		return nil, choice, "tool_choice", fmt.Errorf("tool_choice names function %q, which is not in tools", choice.name)
	}
	if choice.mode == "required" && len(tools) == 0 {
		return nil, choice, "tool_choice", errors.New(`tool_choice "required" needs at least one tool`)
	}
	return tools, choice, "", nil
}

// priorCalls counts the conversation's tool calls so far: new call ids
// continue the count, which keeps them unique within the conversation.
func priorCalls(msgs []chatMessage) int {
	n := 0
	for _, m := range msgs {
		n += len(m.ToolCalls)
	}
	return n
}

// stream writes the reply as chat.completion.chunk events the way the
// OpenAI API does: the role first, then the content or each tool call
// whole, then the finish reason, the usage if asked for, and [DONE].
func stream(w http.ResponseWriter, resp chatResponse, msg *outMessage, finish string, u *usage, includeUsage bool) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	resp.Object = "chat.completion.chunk"
	send := func(choices []chatChoice, u *usage) {
		c := resp
		c.Choices, c.Usage = choices, u
		b, _ := json.Marshal(c)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if f, ok := w.(http.Flusher); ok {
			f.Flush()
		}
	}
	empty := ""
	send([]chatChoice{{Delta: &outDelta{Role: "assistant", Content: &empty}}}, nil)
	if msg.Content != nil {
		send([]chatChoice{{Delta: &outDelta{Content: msg.Content}}}, nil)
	}
	if msg.Refusal != "" {
		send([]chatChoice{{Delta: &outDelta{Refusal: msg.Refusal}}}, nil)
	}
	for i, tc := range msg.ToolCalls {
		tc.Index = &i
		send([]chatChoice{{Delta: &outDelta{ToolCalls: []toolCall{tc}}}}, nil)
	}
	send([]chatChoice{{Delta: &outDelta{}, FinishReason: &finish}}, nil)
	if includeUsage {
		send([]chatChoice{}, u)
	}
	io.WriteString(w, "data: [DONE]\n\n")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

func writeError(w http.ResponseWriter, status int, typ, param, msg string) {
	writeErrorCode(w, status, typ, param, "", msg)
}

// writeErrorCode answers with OpenAI's error body:
// {"error":{"message":...,"type":...,"param":...,"code":...}}.
func writeErrorCode(w http.ResponseWriter, status int, typ, param, code, msg string) {
	e := apiError{Message: msg, Type: typ}
	if param != "" {
		e.Param = &param
	}
	if code != "" {
		e.Code = &code
	}
	writeJSON(w, status, errorBody{Error: e})
}
