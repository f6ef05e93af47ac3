package builtin

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
)

// This file holds the OpenAI chat-completions wire format, as much of it as
// the builtin model reads or writes. The types are our own rather than
// go-openai's so that the handler accepts what any OpenAI-compatible client
// sends (content as a string, null, or an array of parts; tool_choice as a
// string or an object) and so that the tests, which drive the handler through
// go-openai, check the real wire format rather than a shared struct.

type chatRequest struct {
	Model             string          `json:"model"`
	Messages          []chatMessage   `json:"messages"`
	Tools             []toolSpec      `json:"tools"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
	Stream            bool            `json:"stream"`
	StreamOptions     *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	N int `json:"n"`
}

type chatMessage struct {
	Role       string     `json:"role"`
	Content    content    `json:"content"`
	Name       string     `json:"name,omitempty"`
	ToolCalls  []toolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// content is a message's text: the API allows a string, null, or an array of
// typed parts, of which only the text parts mean anything to this model.
type content string

func (c *content) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		*c = ""
		return nil
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*c = content(s)
		return nil
	case len(b) > 0 && b[0] == '[':
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(b, &parts); err != nil {
			return err
		}
		var texts []string
		for _, p := range parts {
			if p.Type == "text" || p.Type == "input_text" || p.Type == "" {
				texts = append(texts, p.Text)
			}
		}
		*c = content(strings.Join(texts, "\n"))
		return nil
	}
	return errors.New("content must be a string, null, or an array of content parts")
}

type toolSpec struct {
	Type     string `json:"type"`
	Function *struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

type toolCall struct {
	Index    *int   `json:"index,omitempty"` // stream chunks only
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type chatResponse struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	SystemFingerprint string       `json:"system_fingerprint"`
	Choices           []chatChoice `json:"choices"`
	Usage             *usage       `json:"usage,omitempty"`
}

type chatChoice struct {
	Index        int         `json:"index"`
	Message      *outMessage `json:"message,omitempty"`
	Delta        *outDelta   `json:"delta,omitempty"`
	Logprobs     *struct{}   `json:"logprobs"`
	FinishReason *string     `json:"finish_reason"`
}

type outMessage struct {
	Role string `json:"role,omitempty"`
	// Content is a pointer so that a tool-call message says "content": null,
	// as the OpenAI API does.
	Content *string `json:"content"`
	// Refusal is the chat API's: set when the text says (part of) the task
	// was not done.
	Refusal   string     `json:"refusal,omitempty"`
	ToolCalls []toolCall `json:"tool_calls,omitempty"`
}

// outDelta is one stream chunk's piece of the message.
type outDelta struct {
	Role      string     `json:"role,omitempty"`
	Content   *string    `json:"content,omitempty"`
	Refusal   string     `json:"refusal,omitempty"`
	ToolCalls []toolCall `json:"tool_calls,omitempty"`
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

type errorBody struct {
	Error apiError `json:"error"`
}

type apiError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

type modelList struct {
	Object string       `json:"object"`
	Data   []modelEntry `json:"data"`
}

type modelEntry struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}
