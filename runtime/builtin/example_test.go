package builtin_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/sashabaranov/go-openai"
	"github.com/switchboard-run/switchboard/runtime/builtin"
)

// The builtin model behind go-openai, in-process: a task, a tool call, the
// tool's result, the answer.
func Example() {
	cfg := openai.DefaultConfig("")
	cfg.BaseURL = builtin.BaseURL
	cfg.HTTPClient = &http.Client{Transport: builtin.Transport()}
	client := openai.NewClientWithConfig(cfg)

	req := openai.ChatCompletionRequest{
		Model:    builtin.ModelName,
		Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "what is 12*(3+4)?"}},
		Tools: []openai.Tool{{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
			Name:        "abacus__calculate",
			Description: "Evaluate an arithmetic expression.",
			Parameters: json.RawMessage(`{"type":"object","required":["expression"],
				"properties":{"expression":{"type":"string","description":"The expression."}}}`),
		}}},
	}
	resp, err := client.CreateChatCompletion(context.Background(), req)
	if err != nil {
		panic(err)
	}
	call := resp.Choices[0].Message.ToolCalls[0]
	fmt.Println(resp.Choices[0].FinishReason, call.Function.Name, call.Function.Arguments)

	req.Messages = append(req.Messages, resp.Choices[0].Message, openai.ChatCompletionMessage{
		Role: openai.ChatMessageRoleTool, ToolCallID: call.ID, Content: "12*(3+4) = 84",
	})
	resp, err = client.CreateChatCompletion(context.Background(), req)
	if err != nil {
		panic(err)
	}
	fmt.Println(resp.Choices[0].FinishReason, resp.Choices[0].Message.Content)
	// Output:
	// tool_calls abacus__calculate {"expression":"12*(3+4)"}
	// stop 12*(3+4) = 84.
}
