# The part of a sanitizer build's gtest log worth reading (scripts/sanitize.sh prints it after
# the run; the whole log stays in a file). A CI log keeps only its last lines, and a sanitizer
# stage prints thousands (every test, every warning the fault tests provoke), so without this a
# failed stage shows nothing of what failed. Prints:
#   - gtest's summary lines and the lists of failed and skipped tests;
#   - each failure's message (from "file:line: Failure" to its test's FAILED line);
#   - each sanitizer report (from its WARNING/ERROR line or UBSan's "runtime error" to its
#     SUMMARY line) under the name of the test that was running, which gtest prints as it
#     starts each test (stdout is flushed there, so the order in the log is the order of events).
# Each block is cut at max_lines lines (default 80).
BEGIN {
  if (max_lines == "") max_lines = 80
  test = "(before the first test)"
}

# Inside a report or a failure message: print until its end, at most max_lines lines.
function take(line) {
  if (++taken <= max_lines) print line
  else if (taken == max_lines + 1) print "  ... (cut; the whole log has the rest)"
}

/^\[ RUN      \] / {
  test = substr($0, 14)
}

# A report ends at its SUMMARY line, or at gtest's next line if it had none.
report && /^\[[ =A-Z]+\] / {
  report = 0
}

report {
  take($0)
  if ($0 ~ /^SUMMARY: /) report = 0
  next
}

# ThreadSanitizer starts its reports with the bare word, AddressSanitizer and LeakSanitizer with
# "==pid==" before it.
/^(==[0-9]+==)?(WARNING|ERROR): (Thread|Address|Leak)Sanitizer/ || / runtime error: / {
  print "--- sanitizer report in " test ":"
  report = 1
  taken = 0
  take($0)
  next
}

failure {
  if ($0 ~ /^\[  FAILED  \] /) {
    failure = 0
    print
  } else {
    take($0)
  }
  next
}

/: Failure$/ {
  print "--- failure in " test ":"
  failure = 1
  taken = 0
  take($0)
  next
}

/^\[==========\] / || /^\[  PASSED  \] / || /^\[  SKIPPED \] [0-9]/ || /^\[  FAILED  \] [0-9]/ \
    || /^ *[0-9]+ FAILED TESTS?$/ || /Sanitizer: reported [0-9]+ warnings?/ {
  print
  listing = $0 ~ /^\[  (FAILED  |SKIPPED )\] [0-9]/
  next
}

# The names gtest lists after its summary's FAILED and SKIPPED counts.
listing && /^\[  (FAILED  |SKIPPED )\] / {
  print
}
