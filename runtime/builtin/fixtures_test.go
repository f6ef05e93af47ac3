package builtin

import (
	"encoding/json"
	"testing"

	"github.com/sashabaranov/go-openai"
)

// The tool sets below are what the oracle's turn loop sends: the packrat and
// abacus agents' MCP tools, namespaced <agent>__<tool>, with the schemas
// those agents declare (properties sorted by name, as delegation.Parameters
// renders them).

const packratSchemas = `[
 {"name":"packrat__store_note",
  "description":"Save (remember, record, archive) a piece of text as a note in packrat's persistent archive, with an optional title and tags, so it can be found again later with search_notes. Returns the note's id. Notes survive restarts. Pass idempotency_key to make a retried call safe; without one, every call stores a new note, even a duplicate.",
  "parameters":{"type":"object","required":["text"],"additionalProperties":false,"properties":{
   "idempotency_key":{"type":"string","maxLength":200,"description":"Optional key that makes retries safe: a second call with the same key stores nothing and returns the first note's id with stored=false. Reusing a key for different content is an error. Without a key every call stores a new note."},
   "tags":{"type":"array","items":{"type":"string","maxLength":64},"maxItems":32,"description":"Labels to file the note under, e.g. [\"work\", \"todo\"] (optional; stored lower-case)."},
   "text":{"type":"string","minLength":1,"description":"The content to archive, verbatim. Required and not blank."},
   "title":{"type":"string","maxLength":300,"description":"A short title for the note (optional)."}}}},
 {"name":"packrat__search_notes",
  "description":"Search (find, look up, recall) notes stored in packrat's archive by words they contain. Case-insensitive substring match; every word of the query must occur in the note's title, text or tags. Returns the matching notes, newest first, up to limit.",
  "parameters":{"type":"object","required":["query"],"additionalProperties":false,"properties":{
   "limit":{"type":"integer","minimum":1,"maximum":100,"default":10,"description":"The most notes to return, newest first."},
   "query":{"type":"string","minLength":1,"description":"Words to look for. A note matches when every word occurs in its title, text or tags (case-insensitive substring match)."},
   "tag":{"type":"string","description":"Only notes carrying this tag (optional)."}}}},
 {"name":"packrat__list_notes",
  "description":"List the most recently stored notes in packrat's archive, newest first, optionally only those carrying a tag. Use search_notes to find notes by their content.",
  "parameters":{"type":"object","additionalProperties":false,"properties":{
   "limit":{"type":"integer","minimum":1,"maximum":100,"default":10,"description":"The most notes to return, newest first."},
   "tag":{"type":"string","description":"Only notes carrying this tag (optional)."}}}},
 {"name":"packrat__get_note",
  "description":"Read one note from packrat's archive by its numeric id (from store_note, search_notes or list_notes): its title, text, tags and creation time.",
  "parameters":{"type":"object","required":["id"],"additionalProperties":false,"properties":{
   "id":{"type":"integer","minimum":1,"description":"The note's numeric id, as returned by store_note, search_notes or list_notes."}}}},
 {"name":"packrat__delete_note",
  "description":"Permanently delete (remove, forget) one note from packrat's archive by its numeric id. Returns the deleted note. Cannot be undone.",
  "parameters":{"type":"object","required":["id"],"additionalProperties":false,"properties":{
   "id":{"type":"integer","minimum":1,"description":"The note's numeric id, as returned by store_note, search_notes or list_notes."}}}}
]`

const abacusSchemas = `[
 {"name":"abacus__calculate",
  "description":"Evaluate an arithmetic expression and return its numeric value (compute, calculate, do math: sums, products, percentages, powers, square roots, rounding). Supports + - * / % ^, parentheses, unary minus, pi, e, and sqrt, abs, round, floor, ceil, min, max, ln, log10, exp. Errors name the character position of the problem.",
  "parameters":{"type":"object","required":["expression"],"additionalProperties":false,"properties":{
   "expression":{"type":"string","minLength":1,"maxLength":1000,"examples":["2 + 3 * 4"],"description":"The arithmetic expression to evaluate, e.g. \"(3 + 4) * 2^3 / 7\" or \"round(sqrt(2), 3)\". Operators: + - * / % (remainder) ^ (power); parentheses; unary minus; constants pi and e; functions sqrt, abs, round(x) or round(x, digits), floor, ceil, min(a, b, ...), max(a, b, ...), ln, log10, exp. No variables and no implicit multiplication (write 2*pi, not 2pi)."}}}},
 {"name":"abacus__convert_units",
  "description":"Convert a quantity from one unit of measure to another of the same kind (unit conversion), e.g. 5 km to mi, 100 °F to °C, 3 GiB to MB, 90 min to h. Knows length (m, km, cm, mm, mi, ft, in, yd), mass (kg, g, lb, oz), temperature (°C, °F, K), time (s, min, h, d), data size (B, KB, MB, GB, KiB, MiB, GiB), volume (l, ml, gal), speed (km/h, mph, m/s) and area (m², km², ft², acre). KB, MB, GB are decimal (1000); KiB, MiB, GiB are binary (1024). Full names and plurals work too (\"miles\", \"degrees Celsius\").",
  "parameters":{"type":"object","required":["value","from","to"],"additionalProperties":false,"properties":{
   "from":{"type":"string","minLength":1,"description":"The unit the value is in, e.g. \"km\", \"lb\", \"°F\", \"GiB\", \"hours\"."},
   "to":{"type":"string","minLength":1,"description":"The unit to convert to, of the same kind, e.g. \"mi\", \"kg\", \"°C\", \"MB\", \"minutes\"."},
   "value":{"type":"number","description":"The quantity to convert, e.g. 5."}}}},
 {"name":"abacus__date_math",
  "description":"Calendar arithmetic on dates (YYYY-MM-DD or \"today\"): add or subtract days, weeks, months or years (what date is 90 days after 2025-01-15?); count the days between two dates (how many days until ...?); or tell the day of the week of a date (what weekday is ...?).",
  "parameters":{"type":"object","required":["operation","date"],"additionalProperties":false,"properties":{
   "amount":{"type":"integer","minimum":-10000000,"maximum":10000000,"description":"For add and subtract: how many units (may be negative)."},
   "date":{"type":"string","description":"The date, as YYYY-MM-DD (ISO 8601), or \"today\"."},
   "end_date":{"type":"string","description":"For between: the second date, as YYYY-MM-DD or \"today\"."},
   "operation":{"type":"string","enum":["add","subtract","between","weekday"],"description":"What to compute: \"add\" or \"subtract\" amount units to/from date; \"between\" for the number of days from date to end_date; \"weekday\" for the day of the week of date."},
   "unit":{"type":"string","enum":["days","weeks","months","years"],"default":"days","description":"For add and subtract: days, weeks, months or years. Months and years keep the day of the month, clamped to the month's last day (Jan 31 + 1 month = Feb 28 or 29)."}}}}
]`

// memorySchemas are two tools of @modelcontextprotocol/server-memory, as
// the runtime offers them.
const memorySchemas = `[
 {"name":"memory__create_entities","description":"Create multiple new entities in the knowledge graph",
  "parameters":{"type":"object","required":["entities"],"properties":{"entities":{"type":"array","items":{"type":"object"}}}}},
 {"name":"memory__search_nodes","description":"Search for nodes in the knowledge graph based on a query",
  "parameters":{"type":"object","required":["query"],"properties":{"query":{"type":"string","description":"The search query to match against entity names, types, and observation content"}}}}
]`

// openaiTools decodes schema lists into go-openai tools.
func openaiTools(t testing.TB, lists ...string) []openai.Tool {
	t.Helper()
	var out []openai.Tool
	for _, l := range lists {
		var defs []struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
		}
		if err := json.Unmarshal([]byte(l), &defs); err != nil {
			t.Fatal(err)
		}
		for _, d := range defs {
			out = append(out, openai.Tool{Type: openai.ToolTypeFunction, Function: &openai.FunctionDefinition{
				Name: d.Name, Description: d.Description, Parameters: d.Parameters}})
		}
	}
	return out
}

// internalTools is the same lists digested as the handler digests them.
func internalTools(t testing.TB, lists ...string) []*tool {
	t.Helper()
	var specs []toolSpec
	for _, ot := range openaiTools(t, lists...) {
		b, err := json.Marshal(ot)
		if err != nil {
			t.Fatal(err)
		}
		var s toolSpec
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatal(err)
		}
		specs = append(specs, s)
	}
	tools, err := parseTools(specs)
	if err != nil {
		t.Fatal(err)
	}
	return tools
}
