"""Coverage-guided fuzzing of the engine's decoders, the protocol frame decoder (issue 11) and the SASL exchanges.

    python -m tests.fuzz <target> [--runs N] [--max-len BYTES] [--rss-limit-mb MB] [--seed S]

Targets (tests/fuzz/targets.py): ``batch`` (batch validator and decoder), ``records`` (record decoder),
``codecs`` (the decompressors as the engine uses them), ``frame`` (protocol request frames) and ``sasl`` (the
broker's PLAIN and SCRAM exchanges); ``all`` runs each in turn. Runs under atheris (libFuzzer; the test extra installs it) from seeds of valid inputs
(tests/fuzz/seeds.py): coverage guidance comes from seglog's Python code (errors, protocol, the generated
codecs), the engine's C code is reached through the structure the targets give the input. Without atheris a
plain mutation loop over the same seeds runs instead (no coverage guidance).

A finding is any exception other than the errors a target allows (seglog's errors for the engine targets,
InvalidRequestError/UnsupportedVersionError for frames, SaslAuthenticationError for sasl, which also fails on
an exchange that succeeds without the password), a crash, or RSS over --rss-limit-mb. libFuzzer
writes the input to ``crash-*``/``oom-*`` under --artifacts. Inputs are capped at --max-len bytes (4096 by
default): the decompressors inflate without a limit of their own here, so a long input can be a
decompression bomb rather than a finding of this fuzzer. The last line is the summary
``<target>: <runs> runs, <crashes> crashes, peak RSS <MiB> MiB`` (tests/fuzz/README.md holds measured runs).
"""
