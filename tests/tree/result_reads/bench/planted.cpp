// Planted for Tree.AStatusStringReadFails: a result's status read as text, outside the reader.
bool planted_passed = planted_result["status"] == "passed";
