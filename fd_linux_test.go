package nccl_test

import "syscall"

func dupFD(fd int) (int, error) { return syscall.Dup(fd) }
func dup2FD(from, to int) error { return syscall.Dup3(from, to, 0) }
