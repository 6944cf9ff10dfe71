package stages

// validReason reports whether s is a reason code a user may give (a
// filter rule's, an exec program's verdict): 1 to 64 lowercase letters,
// digits and _, so it reads as the built-in codes do and is safe in a
// label, a file name and a terminal.
func validReason(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}
