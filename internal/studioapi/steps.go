package studioapi

// StepContent is one model step of a journaled run as the run page opens
// it: the messages the step's request carried and the response it got
// (GET /runs/<id>/steps/<n> of an agent, proxied by the studio as
// /api/agents/<name>/runs/<id>/steps/<n>). Every text is redacted and cut
// at MaxStepText bytes, and the whole at MaxStepContent.
type StepContent struct {
	Agent string `json:"agent"`
	Run   string `json:"run"`
	Step  int    `json:"step"`
	// Steps are the steps the run journaled; State is the run's journal
	// state (JournalRunning...).
	Steps int    `json:"steps"`
	State string `json:"state"`
	// Exact: the messages were rebuilt from the journal as a resume
	// rebuilds them, and the request has the fingerprint journaled for the
	// step, so they are what the model was sent. Otherwise Note says why
	// they may differ.
	Exact bool   `json:"exact"`
	Note  string `json:"note,omitempty"`
	// Tools is how many tools the request offered.
	Tools    int           `json:"tools"`
	Messages []StepMessage `json:"messages"`
	Response StepMessage   `json:"response"`
	// FinishReason is the response's finish_reason.
	FinishReason string `json:"finish_reason,omitempty"`
	// LeftOut counts the bytes of text left out to keep the whole within
	// MaxStepContent (each message left out says so in its text).
	LeftOut int `json:"left_out,omitempty"`
}

// StepMessage is one chat message of a step: its role, its text, the
// reasoning it carried, the tool call it answers or the tool calls it made.
type StepMessage struct {
	Role       string         `json:"role"`
	Content    string         `json:"content"`
	Reasoning  string         `json:"reasoning,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
	ToolCalls  []StepToolCall `json:"tool_calls,omitempty"`
	// Cut is how many bytes of its texts were left out (the text says so
	// where it was cut).
	Cut int `json:"cut,omitempty"`
}

// StepToolCall is a tool call a response made: its id, the tool's name as
// the model wrote it, and the arguments.
type StepToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Bounds of a StepContent.
const (
	MaxStepText    = 16 << 10  // bytes of one text (a message's content, reasoning or a call's arguments)
	MaxStepContent = 256 << 10 // bytes of all of them
)

// Strings applies f to every text of c (for a redaction).
func (c *StepContent) Strings(f func(string) string) {
	c.Note, c.FinishReason = f(c.Note), f(c.FinishReason)
	for i := range c.Messages {
		c.Messages[i].strings(f)
	}
	c.Response.strings(f)
}

func (m *StepMessage) strings(f func(string) string) {
	m.Content, m.Reasoning, m.ToolCallID = f(m.Content), f(m.Reasoning), f(m.ToolCallID)
	for i := range m.ToolCalls {
		tc := &m.ToolCalls[i]
		tc.ID, tc.Name, tc.Arguments = f(tc.ID), f(tc.Name), f(tc.Arguments)
	}
}
