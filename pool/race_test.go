//go:build race

package pool

// raceEnabled: the race detector slows the load tests down several times;
// they use smaller counts under it.
const raceEnabled = true
