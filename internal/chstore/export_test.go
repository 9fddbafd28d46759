package chstore

// SetSourceChunkBytes sets the bound text of sources per statement (for
// tests of the statements split by source) and returns the undo.
func SetSourceChunkBytes(n int) func() {
	old := sourceChunkBytes
	sourceChunkBytes = n
	return func() { sourceChunkBytes = old }
}
