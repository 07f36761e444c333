// A planted positional operand read: what scripts/positional_operands.py refuses.
float* planted_dst = static_cast<float*>(b[3].data);
