"""Training the drafters that learn: Medusa's heads, EagleLite's layer, the early-exit adapter and the
distilled draft LM. One module each holds the network, its training by self-distillation (specnotes.distill,
in fp32 through weights.train_in_fp32) and its loader (weights.load_or_train); the Drafter classes that use
them are in specnotes.drafters. Notebook 06 trains them; tools/train_drafters.py writes the committed weights.
"""
