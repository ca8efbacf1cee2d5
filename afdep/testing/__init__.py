"""Reference dispatch/combine, layout checks and route strategies for afdep tests."""
