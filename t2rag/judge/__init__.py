"""A machine judge with ratings (TableQuest's evaluation framework): a judge model says which of two answers to a
question is more accurate, a method's against a baseline method's, and Elo ratings with the baseline fixed at 1000
are made of the verdicts."""
