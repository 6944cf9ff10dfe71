# bench/lib/prompts.sh — sourced by the bench scripts.
#
# rehearsal_prompts N: N prompts in the three shapes read-prompts takes
# (messages, prompt, conversations), each with its own id, on stdout.
rehearsal_prompts() {
	awk -v n="$1" 'BEGIN {
		for (i = 0; i < n; i++) {
			if (i % 3 == 0) printf "{\"id\":\"r-%07d\",\"messages\":[{\"role\":\"user\",\"content\":\"Question %d: explain the idea behind exercise %d in a few steps.\"}]}\n", i, i, i % 977
			else if (i % 3 == 1) printf "{\"id\":\"r-%07d\",\"prompt\":\"Prove that %d + %d is even or odd, and say which.\"}\n", i, i, i % 89
			else printf "{\"id\":\"r-%07d\",\"conversations\":[{\"from\":\"human\",\"value\":\"Translate item %d into French.\"}]}\n", i, i
		}
	}'
}
