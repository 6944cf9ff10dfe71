//go:build unix && !linux

package ollamatest

import "syscall"

// sysProcAttr puts the server in its own process group (its runners join it).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// groupMembers reports process group pgid as one pid while any member is
// alive (zombies included: there is no portable way to tell them apart).
func groupMembers(pgid int) []int {
	if syscall.Kill(-pgid, 0) != nil {
		return nil
	}
	return []int{pgid}
}
