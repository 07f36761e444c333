// A planted positional operand read: what scripts/positional_operands.py refuses.
float* planted_dst(const Buffer* b) { return static_cast<float*>(b[3].data); }
