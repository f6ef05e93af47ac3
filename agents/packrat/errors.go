package packrat

import "errors"

// The store's errors. Tool handlers return them (wrapped, with the offending
// id or key) as tool errors, so the model reads the text; tests check them
// with errors.Is.
var (
	// errNotFound: no note has the id (it never existed or was deleted).
	errNotFound = errors.New("not found")
	// errEmptyText: a note must say something.
	errEmptyText = errors.New("note text is empty")
	// errKeyConflict: an idempotency key was reused for a different note.
	// Returning the old note as if the new one had been stored would lose
	// the new content silently.
	errKeyConflict = errors.New("idempotency key already used for a different note")
	// errInvalid: an argument is out of range (too long, too many tags).
	errInvalid = errors.New("invalid argument")
	// errNewerSchema: the database was written by a newer packrat; opening
	// it with this one could lose what the newer one stored.
	errNewerSchema = errors.New("newer than this packrat understands")
	// errSymlink: a data path is a symbolic link out of its directory.
	errSymlink = errors.New("refusing a data path that is a symbolic link out of its directory")
)
