# Shortcuts for the README's commands (each installs what it needs).
.PHONY: demo test bench
demo:
	./scripts/demo.sh
test:
	./scripts/test.sh
bench:
	./scripts/bench.sh
