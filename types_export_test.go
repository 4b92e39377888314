package nccl

// Unexported facts of data types, for the external tests.
var (
	DataTypeSince = dataTypeSince
	DataTypeCName = dataTypeCName
	IsFloat8      = isFloat8
)
