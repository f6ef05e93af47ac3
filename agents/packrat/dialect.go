package packrat

import (
	"errors"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// The store's SQL is written once, with ? placeholders, and is the same on
// SQLite and PostgreSQL but for what a dialect holds: PostgreSQL numbers its
// placeholders ($1, $2, ...), and has its own substring and JSON functions.
type dialect struct {
	numbered bool   // placeholders $n rather than ?
	contains string // the search condition "folded contains the term ?"
	hasTag   string // "the note's tags include ?"
}

var (
	sqliteDialect = dialect{
		contains: "instr(folded, ?) > 0",
		hasTag:   "EXISTS (SELECT 1 FROM json_each(notes.tags) WHERE value = ?)",
	}
	pgDialect = dialect{
		numbered: true,
		contains: "strpos(folded, ?) > 0",
		hasTag:   "EXISTS (SELECT 1 FROM json_array_elements_text(notes.tags::json) AS t(value) WHERE t.value = ?)",
	}
)

// q is query in the store's dialect. The store's queries hold no '?' but
// their placeholders (no string literal has one).
func (d dialect) q(query string) string {
	if !d.numbered {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// uniqueViolation is PostgreSQL's SQLSTATE for a UNIQUE index refusing a
// row (Appendix A, class 23).
const uniqueViolation = "23505"

// retryable reports whether err means a transaction of put was rolled back
// because another replica inserted the same key first (PostgreSQL's
// unique_violation): nothing was stored, and a retry finds the other's row.
func (d dialect) retryable(err error) bool {
	var pe *pgconn.PgError
	return d.numbered && errors.As(err, &pe) && pe.Code == uniqueViolation
}
