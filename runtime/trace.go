package runtime

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/sashabaranov/go-openai"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Each model call is a client span named as the OpenTelemetry GenAI
// conventions name it, "chat <model>", under whatever span the turn runs in
// (the agent server's tools/call). The span carries the model, the step and
// what came back (finish reason, tool calls, token counts), never the
// prompt, the answer or the endpoint's error text: an error from a provider
// can quote the API key, and a trace is stored where a log is not read.

const tracerName = "github.com/switchboard-run/switchboard/runtime"

// chat runs one chat completion inside its span: as a stream unless the
// agent's options, the environment or the endpoint say otherwise
// (stream.go).
func (a *Agent) chat(ctx context.Context, req openai.ChatCompletionRequest, step int) (openai.ChatCompletionResponse, error) {
	provider := "openai"
	if a.model.builtin {
		provider = BuiltinModel
	}
	ctx, span := otel.Tracer(tracerName).Start(ctx, "chat "+a.model.name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("gen_ai.operation.name", "chat"),
		attribute.String("gen_ai.provider.name", provider),
		attribute.String("gen_ai.request.model", a.model.name),
		attribute.String("switchboard.agent", a.def.Name),
		attribute.Int("switchboard.step", step),
		attribute.Int("switchboard.tools_offered", len(req.Tools)),
	))
	defer span.End()
	stream, err := a.streaming()
	var resp openai.ChatCompletionResponse
	if err == nil {
		if stream {
			resp, stream, err = a.chatStream(ctx, req, step)
		} else {
			resp, err = a.chatWhole(ctx, req, step)
		}
	}
	span.SetAttributes(attribute.Bool("switchboard.stream", stream))
	if err != nil {
		errType := "request"
		var apiErr *openai.APIError
		var reqErr *openai.RequestError
		switch {
		case errors.Is(err, ErrModelTimeout):
			errType = "timeout"
		case ctx.Err() != nil:
			errType = "canceled"
		case errors.As(err, &apiErr) && apiErr.HTTPStatusCode != 0:
			errType = strconv.Itoa(apiErr.HTTPStatusCode)
		case errors.As(err, &reqErr) && reqErr.HTTPStatusCode != 0:
			errType = strconv.Itoa(reqErr.HTTPStatusCode)
		}
		span.SetAttributes(attribute.String("error.type", errType))
		span.SetStatus(codes.Error, "model request failed")
		return resp, err
	}
	attrs := []attribute.KeyValue{
		attribute.String("gen_ai.response.model", resp.Model),
		attribute.Int("gen_ai.usage.input_tokens", resp.Usage.PromptTokens),
		attribute.Int("gen_ai.usage.output_tokens", resp.Usage.CompletionTokens),
	}
	if len(resp.Choices) > 0 {
		c := resp.Choices[0]
		attrs = append(attrs,
			attribute.StringSlice("gen_ai.response.finish_reasons", []string{string(c.FinishReason)}),
			attribute.Int("switchboard.tool_calls", len(c.Message.ToolCalls)))
	}
	span.SetAttributes(attrs...)
	return resp, nil
}

// chatWhole runs one chat completion whose answer comes in one body. The
// deadline is the request's own: a turn of many steps gets the whole of it
// for each.
func (a *Agent) chatWhole(ctx context.Context, req openai.ChatCompletionRequest, step int) (openai.ChatCompletionResponse, error) {
	rctx, cancel := context.WithTimeoutCause(ctx, a.opts.ModelTimeout, ErrModelTimeout)
	defer cancel()
	stop := a.stillWorking(ctx, &liveness{began: time.Now()}, step)
	defer stop()
	resp, err := a.model.client.CreateChatCompletion(rctx, req)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(rctx), ErrModelTimeout) {
		err = fmt.Errorf("%w: no answer within %v (set $%s or --model-timeout): %w", ErrModelTimeout, a.opts.ModelTimeout, EnvModelTimeout, err)
	}
	return resp, err
}
