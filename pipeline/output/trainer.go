package output

// TrainerFile is implemented by the config of a writer whose output a
// trainer loads as it is (a trainer layout). The run's end writes the
// trainer's data block beside it (pipe run's handoff) from what it says,
// never from the config's fields or tags.
type TrainerFile interface {
	// TrainerFile is the output's layout and path, and the max_length its
	// rows are cut at (0: [trainer]'s). ok is false for a stage whose
	// output is not a trainer's file.
	TrainerFile() (layout, path string, maxLength int, ok bool)
}
