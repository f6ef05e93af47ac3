package studioapi

import "time"

// What an agent's run journal holds (docs/DURABILITY.md §3): GET /runs and
// /runs/<id> on an agent (`agent serve`, beside /healthz and /readyz,
// behind the same Host, Origin and bearer checks as its /mcp), which the
// studio serves as GET /api/agents/<name>/runs[/<id>]; `switchboard runs`
// and `status` read it there.

// Run journal states (internal/journal.State).
const (
	JournalRunning     = "running"
	JournalInterrupted = "interrupted"
	JournalFailed      = "failed"
	JournalDone        = "done"
	JournalBroken      = "broken"
)

// JournalRun is one run of an agent's journal.
type JournalRun struct {
	// ID is the run id: what ask --resume RUN, the console's Resume button
	// and POST /api/agents/<name>/runs/<id>/resume take.
	ID    string `json:"id"`
	Agent string `json:"agent"`
	// State is running, interrupted (its process ended while it ran),
	// failed (ended by something outside it), done or broken (its journal
	// cannot be trusted: never resumed).
	State string `json:"state"`
	// Resumable: interrupted or failed, so a resume goes on with it; a
	// resume of a done run returns its answer again.
	Resumable bool `json:"resumable"`
	// Task is the task, shortened, redacted as the logs are.
	Task string `json:"task"`
	// Steps and Delegations are what the journal holds of the run: a
	// resume replays them instead of asking again.
	Steps       int `json:"steps"`
	Delegations int `json:"delegations"`
	// Attempts counts the times the run was started (1, then one more per
	// resume).
	Attempts int       `json:"attempts"`
	Started  time.Time `json:"started"`
	Updated  time.Time `json:"updated"`
	// Status is a done run's end (answered, not_answered, ...).
	Status string `json:"status,omitempty"`
	// Why says why it ended, or why it is not running (redacted).
	Why string `json:"why,omitempty"`
	// Keyed: its ask carried an idempotency key, so the caller's keyed
	// retry (after a crash or a shutdown) resumes it too.
	Keyed bool `json:"keyed"`
}

// JournalRuns is GET /runs on an agent.
type JournalRuns struct {
	Agent string       `json:"agent"`
	Runs  []JournalRun `json:"runs"`
	// Resumable counts the caller's runs that may be resumed (interrupted
	// or failed), listed or not.
	Resumable int `json:"resumable"`
}

// MaxJournalRuns bounds the runs one GET /runs lists (?limit=).
const MaxJournalRuns = 1000

// ResumeResult is POST /api/agents/<name>/runs/<id>/resume: what the
// resumed run answered (its ask's result, redacted).
type ResumeResult struct {
	Agent string `json:"agent"`
	Run   string `json:"run"`
	// IsError: the run ended without doing its task fully (Status says
	// how, Text why).
	IsError bool   `json:"is_error"`
	Answer  string `json:"answer"`
	Status  string `json:"status"`
	Text    string `json:"text"`
	// Resumed, ReplayedSteps and ReplayedDelegations: what the journal
	// answered instead of the model and the siblings. A run that was over
	// is answered from its journal without running (Resumed false).
	Resumed             bool `json:"resumed"`
	ReplayedSteps       int  `json:"replayed_steps"`
	ReplayedDelegations int  `json:"replayed_delegations"`
}
