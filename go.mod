module github.com/nccl4go/nccl

go 1.24

require github.com/x448/float16 v0.8.4
