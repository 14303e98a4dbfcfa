package endpoint

// SetBeforeWrite makes Update call f before each of its writes, so that a
// test can land another writer's change between Update's read and write.
func SetBeforeWrite(s *Store, f func()) { s.SetBeforeWrite(f) }
